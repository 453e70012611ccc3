#pragma once
// Strict reading of a JSON config section into a struct. Every key must be known, every value of
// the right type and in range; anything else is a one-line error naming the full key path and the
// fix. Reading a section back out (to_json) gives the fully explicit config recorded in each run.
#include <array>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace normlab {

using Json = nlohmann::ordered_json;

// The one bound on nesting for every recursive reader: a JSON document normlab reads (a config, a sweep, a step
// log, checkpoint metadata, a formula file) and a formula (its parentheses, operators and lets) may nest at most
// kMaxNesting levels. Deeper input is refused where it is read, so that nothing later (a dump on an error path, a
// copy, a type check, an evaluation) recurses without bound and overflows the stack. Real configs nest under 10
// levels and real formulas under 30.
inline constexpr int kMaxNesting = 200;

// How deep arrays and objects nest in JSON text (0 for a scalar), counted in one pass without recursion; brackets
// inside strings do not count.
int json_nesting(std::string_view text);
// Refuses JSON text that nests deeper than kMaxNesting, naming `where` (a file) and the depth.
void check_nesting(std::string_view text, const std::string& where);
// Json::parse(text) for readers that treat bad text as their own error: a discarded value (is_discarded()) when
// the text is not JSON or nests deeper than kMaxNesting.
Json parse_json_or_discarded(std::string_view text);

// How an enumerated config value is spelled: one table per enum, the only place its names are written. A config is
// read and written through it, so the rest of the code compares enums, never strings.
template <typename E>
struct Spelling {
  E value;
  std::string_view name;
};
template <typename E, size_t N>
using Spellings = std::array<Spelling<E>, N>;

template <typename E, size_t N>
constexpr std::string_view name_of(E value, const Spellings<E, N>& table) {
  for (const auto& s : table)
    if (s.value == value) return s.name;
  return "?";
}
template <typename E, size_t N>
std::optional<E> value_of(std::string_view name, const Spellings<E, N>& table) {
  for (const auto& s : table)
    if (s.name == name) return s.value;
  return std::nullopt;
}
template <typename E, size_t N>
std::vector<std::string> names_of(const Spellings<E, N>& table) {
  std::vector<std::string> names;
  for (const auto& s : table) names.emplace_back(s.name);
  return names;
}

class ConfigReader {
 public:
  // `where` names the section in messages, e.g. "config.json: model".
  ConfigReader(const Json& section, std::string where);

  void read(const std::string& key, int& out, int min, int max);
  void read(const std::string& key, double& out, double min, double max);
  void read(const std::string& key, bool& out);
  void read(const std::string& key, std::string& out, const std::vector<std::string>& choices);  // empty = any
  void read(const std::string& key, std::optional<bool>& out);                                   // true|false|"auto"
  void read(const std::string& key, uint64_t& out);
  void read(const std::string& key, std::vector<std::string>& out);
  // An enumerated value, spelled as `table` spells it (anything else is refused with the list).
  template <typename E, size_t N>
  void read(const std::string& key, E& out, const Spellings<E, N>& table) {
    std::string name(name_of(out, table));
    read(key, name, names_of(table));
    out = *value_of(name, table);
  }
  // A nested section; fn reads it with its own ConfigReader.
  void section(const std::string& key, const std::function<void(ConfigReader&)>& fn);
  // Free-form object kept as JSON (variant switches are validated by the variant itself).
  void read(const std::string& key, Json& out);
  // The raw value of a key (marked known), or nullptr; for sections parsed by their own reader.
  const Json* raw(const std::string& key) { return find(key); }
  // Fails on the first key that no read() asked for.
  void finish() const;
  const std::string& where() const { return where_; }

 private:
  const Json* find(const std::string& key);
  [[noreturn]] void wrong_type(const std::string& key, const char* expected, const Json& value) const;

  const Json& json_;
  std::string where_;
  std::set<std::string> known_;
};

// A config document (a --config file, a sweep file, a run's config.json) from its text; `where` names it. Refused
// when it is not JSON, or when an object holds a key twice (JSON leaves that undefined, and the parser would keep
// the last silently), naming the key's path, and when it nests deeper than kMaxNesting.
Json parse_config_json(std::string_view text, const std::string& where);

// Applies "a.b.c=value" overrides to a JSON document; the value is parsed as JSON if it can be
// (numbers, true/false, quoted strings, arrays), else taken as a string.
void apply_override(Json& doc, const std::string& assignment);

}  // namespace normlab
