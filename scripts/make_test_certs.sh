#!/usr/bin/env bash
# Makes a throw-away certificate authority and certificates signed by it, for TLS in tests and
# in a cluster on one machine. Not for production: the CA's key sits beside the certificates,
# unprotected.
#
#   scripts/make_test_certs.sh DIR [--ip ADDRESS]... [--dns NAME]... [--client NAME]...
#
# Writes, in DIR (created if missing):
#   ca.crt, ca.key          the CA (what every peer is told to trust: --tls-ca)
#   server.crt, server.key  one certificate for every daemon, valid for localhost, 127.0.0.1,
#                           and each --ip and --dns given (--tls-cert, --tls-key)
#   NAME.crt, NAME.key      for each --client NAME: a client certificate whose subject's common
#                           name is NAME, the identity mutual TLS gives its connections
# Keys are ECDSA P-256; certificates are valid for 30 days. Needs the openssl command.
set -euo pipefail

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; -*) usage >&2; exit 2 ;; esac
dir=$1
shift
sans="DNS:localhost,IP:127.0.0.1,DNS:127.0.0.1"
clients=()
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "make_test_certs.sh: $1 needs a value" >&2; exit 2; }
  case "$1" in
    --ip) sans="$sans,IP:$2,DNS:$2" ;;
    --dns) sans="$sans,DNS:$2" ;;
    --client)
      [[ "$2" =~ ^[A-Za-z0-9._-]+$ ]] || {
        echo "make_test_certs.sh: client name '$2' may hold only letters, digits, '.', '_', '-'" >&2
        exit 2
      }
      clients+=("$2") ;;
    *) echo "make_test_certs.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift 2
done
command -v openssl > /dev/null || { echo "make_test_certs.sh: needs openssl" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2> /dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days 30 -subj "/CN=cairn test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out ca.crt 2> /dev/null

# sign NAME SUBJECT EXTENSIONS
sign() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2> /dev/null
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -sha256 \
    -extfile "$1.ext" -out "$1.crt" 2> /dev/null
  rm -f "$1.csr" "$1.ext"
}

sign server "/CN=cairn node" "subjectAltName=$sans
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth"
for name in "${clients[@]}"; do
  sign "$name" "/CN=$name" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
done
rm -f ca.srl
chmod 600 ./*.key
echo "make_test_certs.sh: wrote ca.crt, server.crt${clients[*]:+ and ${clients[*]/%/.crt}} (with their keys) in $dir"
