// SPDX-License-Identifier: Apache-2.0
//! \file tests/support/fixtures_path.hpp
//! \brief Locates the golden-data folder (`shared/fixtures`) for the tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace linstate_test {

//! The fixtures folder, as an absolute path, or an empty path when it cannot be found.
//!
//! Search order:
//!  1. the environment variable `LINSTATE_FIXTURES`, if set and non-empty. It is then the only
//!     candidate: when it does not name a directory the result is empty, so a wrong setting is
//!     noticed instead of silently picking up other data;
//!  2. `../shared/fixtures`, `../../shared/fixtures`, `../../../shared/fixtures`, relative to the
//!     current directory (the source root, a build folder inside it, or one level deeper).
inline std::filesystem::path fixtures_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const char* env = std::getenv("LINSTATE_FIXTURES"); env != nullptr && *env != '\0') {
    const fs::path p(env);
    if (!fs::is_directory(p, ec)) return {};
    const fs::path abs = fs::absolute(p, ec);
    return ec ? p : abs;
  }
  for (const char* rel : {"../shared/fixtures", "../../shared/fixtures", "../../../shared/fixtures"}) {
    const fs::path p(rel);
    if (fs::is_directory(p, ec)) {
      const fs::path canon = fs::weakly_canonical(p, ec);
      return ec ? p : canon;
    }
  }
  return {};
}

}  // namespace linstate_test
