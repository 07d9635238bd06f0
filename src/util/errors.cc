// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/util/errors.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/util/strings.h"

namespace cairn::internal {

std::string ErrnoName(int error_number) {
  switch (error_number) {
#define CAIRN_ERRNO_CASE(e) \
  case e:                   \
    return #e;
    CAIRN_ERRNO_CASE(EIO)
    CAIRN_ERRNO_CASE(ENOSPC)
    CAIRN_ERRNO_CASE(EDQUOT)
    CAIRN_ERRNO_CASE(ENOENT)
    CAIRN_ERRNO_CASE(EEXIST)
    CAIRN_ERRNO_CASE(EACCES)
    CAIRN_ERRNO_CASE(EPERM)
    CAIRN_ERRNO_CASE(EINVAL)
    CAIRN_ERRNO_CASE(EBADF)
    CAIRN_ERRNO_CASE(ENOTDIR)
    CAIRN_ERRNO_CASE(EISDIR)
    CAIRN_ERRNO_CASE(ENOTEMPTY)
    CAIRN_ERRNO_CASE(EAGAIN)
    CAIRN_ERRNO_CASE(EINTR)
    CAIRN_ERRNO_CASE(ENOSYS)
    CAIRN_ERRNO_CASE(EOPNOTSUPP)
    CAIRN_ERRNO_CASE(EROFS)
    CAIRN_ERRNO_CASE(ENOMEM)
    CAIRN_ERRNO_CASE(EMFILE)
    CAIRN_ERRNO_CASE(EFBIG)
#undef CAIRN_ERRNO_CASE
    default:
      return absl::StrCat("errno ", error_number);
  }
}

absl::Status ErrnoStatus(int error_number, std::string_view what) {
  std::string message =
      absl::StrCat(Sv(what), ": ", std::strerror(error_number), " (", ErrnoName(error_number), ")");
  switch (error_number) {
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    case EIO:
      // The device failed: the caller cannot tell what reached the disk.
      return absl::InternalError(message);
    default:
      return absl::Status(absl::ErrnoToStatusCode(error_number), message);
  }
}

}  // namespace cairn::internal
