#pragma once

// Early-return macros for absl::Status / StatusOr, for parsers where every step can fail.

// Assigns the value of a StatusOr expression to `lhs`, or returns its error.
#define FG_ASSIGN(lhs, expr)                      \
  do {                                            \
    auto fg_value = (expr);                       \
    if (!fg_value.ok()) return fg_value.status(); \
    lhs = *std::move(fg_value);                   \
  } while (false)

// Returns the Status expression when it is an error.
#define FG_RETURN_IF_ERROR(expr)                                    \
  do {                                                              \
    if (auto fg_status = (expr); !fg_status.ok()) return fg_status; \
  } while (false)
