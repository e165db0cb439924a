#include "distributed/ps/ps_options.h"

namespace ts::distributed::ps {

std::string_view to_string(PsMode mode) {
  switch (mode) {
    case PsMode::sync: return "sync";
    case PsMode::async: return "async";
    case PsMode::bounded: return "bounded";
    case PsMode::eager: return "eager";
  }
  return "sync";
}

std::optional<PsMode> parse_ps_mode(std::string_view text) {
  for (const PsMode m : {PsMode::sync, PsMode::async, PsMode::bounded, PsMode::eager}) {
    if (text == to_string(m)) return m;
  }
  return std::nullopt;
}

}  // namespace ts::distributed::ps
