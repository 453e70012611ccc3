#include "common/config_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace normlab {

ConfigReader::ConfigReader(const Json& section, std::string where) : json_(section), where_(std::move(where)) {
  if (!json_.is_object()) fail("{}: expected an object {{...}}, got {}", where_, json_.dump());
}

const Json* ConfigReader::find(const std::string& key) {
  known_.insert(key);
  auto it = json_.find(key);
  return it == json_.end() ? nullptr : &*it;
}

void ConfigReader::wrong_type(const std::string& key, const char* expected, const Json& value) const {
  fail("{}.{}: expected {}, got {}", where_, key, expected, value.dump());
}

void ConfigReader::read(const std::string& key, int& out, int min, int max) {
  const Json* v = find(key);
  if (!v) return;
  if (!v->is_number_integer()) wrong_type(key, "an integer", *v);
  auto value = v->get<int64_t>();
  if (value < min || value > max) fail("{}.{}: {} is out of range [{}, {}]", where_, key, value, min, max);
  out = static_cast<int>(value);
}

void ConfigReader::read(const std::string& key, double& out, double min, double max) {
  const Json* v = find(key);
  if (!v) return;
  if (!v->is_number()) wrong_type(key, "a number", *v);
  double value = v->get<double>();
  if (!std::isfinite(value) || value < min || value > max)
    fail("{}.{}: {} is out of range [{}, {}]", where_, key, value, min, max);
  out = value;
}

void ConfigReader::read(const std::string& key, bool& out) {
  const Json* v = find(key);
  if (!v) return;
  if (!v->is_boolean()) wrong_type(key, "true or false", *v);
  out = v->get<bool>();
}

void ConfigReader::read(const std::string& key, std::string& out, const std::vector<std::string>& choices) {
  const Json* v = find(key);
  if (!v) return;
  if (!v->is_string()) wrong_type(key, "a string", *v);
  auto value = v->get<std::string>();
  if (!choices.empty() && std::find(choices.begin(), choices.end(), value) == choices.end()) {
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    fail("{}.{}: '{}' is not one of: {}", where_, key, value, list);
  }
  out = value;
}

void ConfigReader::read(const std::string& key, std::optional<bool>& out) {
  const Json* v = find(key);
  if (!v) return;
  if (v->is_boolean()) out = v->get<bool>();
  else if (v->is_string() && v->get<std::string>() == "auto") out.reset();
  else wrong_type(key, "true, false or \"auto\"", *v);
}

void ConfigReader::read(const std::string& key, uint64_t& out) {
  const Json* v = find(key);
  if (!v) return;
  if (!v->is_number_integer() || v->get<int64_t>() < 0) wrong_type(key, "a non-negative integer", *v);
  out = v->get<uint64_t>();
}

void ConfigReader::read(const std::string& key, std::vector<std::string>& out) {
  const Json* v = find(key);
  if (!v) return;
  if (!v->is_array()) wrong_type(key, "a list of strings", *v);
  out.clear();
  for (const Json& e : *v) {
    if (!e.is_string()) wrong_type(key, "a list of strings", *v);
    out.push_back(e.get<std::string>());
  }
}

void ConfigReader::section(const std::string& key, const std::function<void(ConfigReader&)>& fn) {
  const Json* v = find(key);
  if (!v) return;
  ConfigReader sub(*v, where_ + "." + key);
  fn(sub);
  sub.finish();
}

void ConfigReader::read(const std::string& key, Json& out) {
  const Json* v = find(key);
  if (!v) return;
  if (!v->is_object()) wrong_type(key, "an object", *v);
  out = *v;
}

void ConfigReader::finish() const {
  for (const auto& [key, value] : json_.items()) {
    if (known_.contains(key)) continue;
    std::string list;
    for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
    fail("{}: unknown key '{}' (known keys: {})", where_, key, list);
  }
}

int json_nesting(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

void check_nesting(std::string_view text, const std::string& where) {
  if (const int depth = json_nesting(text); depth > kMaxNesting)
    fail("{}: arrays and objects nest {} levels deep, more than the {} normlab reads: flatten the file", where, depth,
         kMaxNesting);
}

Json parse_json_or_discarded(std::string_view text) {
  if (json_nesting(text) > kMaxNesting) return Json(Json::value_t::discarded);
  return Json::parse(text, nullptr, false);
}

Json parse_config_json(std::string_view text, const std::string& where) {
  // The keys met so far in each object being read, and the key each one is reading now (for the path).
  struct Open {
    std::set<std::string> keys;
    std::string key;
  };
  std::vector<Open> open;
  std::string duplicate;  // the first key met twice, as a path
  const Json::parser_callback_t check = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) open.emplace_back();
    else if (event == Json::parse_event_t::object_end && !open.empty()) open.pop_back();
    else if (event == Json::parse_event_t::key && !open.empty()) {
      open.back().key = parsed.get<std::string>();
      if (!open.back().keys.insert(open.back().key).second && duplicate.empty())
        for (const Open& o : open) duplicate += (duplicate.empty() ? "" : ".") + o.key;
    }
    return true;
  };
  // Checked before parsing: the parser with a callback, and a document's later uses (a dump in a message, a copy),
  // recurse once per level (under AddressSanitizer a 20 000-deep sweep file overflowed the stack).
  check_nesting(text, where);
  Json doc;
  try {
    doc = Json::parse(text, check);
  } catch (const nlohmann::json::parse_error& e) {
    fail("{}: not valid JSON (at byte {}): fix the file", where, e.byte);
  } catch (const nlohmann::json::out_of_range&) {  // a number past a double's range, e.g. 1e999
    fail("{}: a number is too large for a double (at most about 1.8e308): fix the file", where);
  }
  if (!duplicate.empty())
    fail("{}: the key '{}' appears twice in one object, and only one value can count: keep one", where,
         printable(duplicate));
  return doc;
}

void apply_override(Json& doc, const std::string& assignment) {
  // Keys and string values end up in config.json: text that is not UTF-8 could not be written there.
  try {
    (void)Json(assignment).dump();
  } catch (const nlohmann::json::exception&) {
    fail("override '{}': not valid UTF-8 text", printable(assignment));
  }
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) fail("override '{}': expected key=value, e.g. model.n_layers=12", assignment);
  std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  Json value = Json::parse(text, nullptr, false);
  if (value.is_discarded()) value = text;
  // The key's sections nest too: a.b.c=[1] is three objects and an array deep.
  const auto sections = std::count(path.begin(), path.end(), '.') + 1;
  if (const auto depth = sections + (value.is_string() ? 0 : json_nesting(text)); depth > kMaxNesting)
    fail("override '{}': the key and value nest {} levels deep, more than the {} normlab reads: flatten it",
         printable(assignment, 60), depth, kMaxNesting);
  Json* node = &doc;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) fail("override '{}': empty key in path '{}'", assignment, path);
    if (!node->is_object()) fail("override '{}': '{}' is not a section", assignment, key);
    if (dot == std::string::npos) {
      (*node)[key] = value;
      return;
    }
    node = &(*node)[key];
    if (node->is_null()) *node = Json::object();
    start = dot + 1;
  }
}

}  // namespace normlab
