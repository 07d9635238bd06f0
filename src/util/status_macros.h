// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Small status-propagation macros. Abseil 20220623 ships none, so cairn keeps its own.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CAIRN_CONCAT_INNER_(a, b) a##b
#define CAIRN_CONCAT_(a, b) CAIRN_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function if not OK.
#define CAIRN_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status cairn_status_ = (expr);         \
    if (!cairn_status_.ok()) return cairn_status_; \
  } while (false)

// `CAIRN_ASSIGN_OR_RETURN(auto x, MakeX());` evaluates an absl::StatusOr<T>; on error returns the
// status, otherwise move-assigns the value to the left-hand side.
#define CAIRN_ASSIGN_OR_RETURN(lhs, expr) \
  CAIRN_ASSIGN_OR_RETURN_IMPL_(CAIRN_CONCAT_(cairn_statusor_, __LINE__), lhs, expr)

#define CAIRN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)  \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
