#pragma once
// What the session has to tell the user as it goes (a warning, where results went): the text,
// whole lines included, handed to whoever runs the session; session/ itself prints nothing.
#include <functional>
#include <string>

namespace ts::session {

using Notice = std::function<void(const std::string& text)>;

// Hands `text` to `notice` when there is one (a session without a listener says nothing).
inline void tell(const Notice& notice, const std::string& text) {
  if (notice) notice(text);
}

}  // namespace ts::session
