// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairnd as a child process of a test: started with the given arguments, its log (stderr) in a
// file, ready once it logged the line that says where it listens. Needs CAIRND_PATH.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace cairn::testing {

class Daemon {
 public:
  // `args` follow the program name, e.g. {"store", "--data-dir", D, "--listen", "127.0.0.1:0"}.
  Daemon(std::vector<std::string> args, const std::string& log_path) : log_path_(log_path) {
    args.insert(args.begin(), CAIRND_PATH);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(posix_spawn(&pid_, CAIRND_PATH, &actions, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
    // Its one line when listening names the port ("store node listening on ...", "proxy
    // listening on ...").
    const std::regex listening("listening on 127\\.0\\.0\\.1:([0-9]+)");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (port_ == 0) {
      std::smatch match;
      const std::string log = Log();
      if (std::regex_search(log, match, listening)) {
        port_ = std::stoi(match[1]);
        break;
      }
      int status = 0;
      INFO(log);
      REQUIRE(waitpid(pid_, &status, WNOHANG) == 0);  // still running
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // Sends SIGTERM; safe from any thread.
  void SendTerminate() const { kill(pid_, SIGTERM); }

  // SIGTERM, then the exit status.
  int Terminate() {
    SendTerminate();
    return WaitExit();
  }

  // SIGKILL, and waits for it to be gone.
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

  int WaitExit() {
    int status = 0;
    REQUIRE(waitpid(pid_, &status, 0) == pid_);
    pid_ = 0;
    INFO(Log());
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
  }

 private:
  std::string log_path_;
  pid_t pid_ = 0;
  int port_ = 0;
};

}  // namespace cairn::testing
