#pragma once
// A failed system call in the launcher: a std::system_error naming the call, with errno's text.
#include <cerrno>
#include <system_error>

namespace strata::launcher {

[[noreturn]] inline void throw_errno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

}  // namespace strata::launcher
