#include "model/config.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "model/formula.h"
#include "model/norm.h"
#include "model/placement.h"

namespace normlab::model {

bool ModelConfig::has_final_norm() const { return final_norm.value_or(placement_of(*this).final_norm); }
int ModelConfig::stream_width() const { return placement_of(*this).compressed_stream ? d_model - 1 : d_model; }

namespace {

// Every switch at its default, then the given options on top, each checked by name and type.
Json resolve_options(const Placement& p, const Json& given, const std::string& where) {
  Json options = Json::object();
  for (auto table : {common_switches(), p.switches})
    for (const Switch& s : table) options[std::string(s.name)] = Json::parse(s.default_json);
  if (!given.is_object()) fail("{}.options: expected an object {{...}}", where);
  for (const auto& [key, value] : given.items()) {
    auto it = options.find(key);
    if (it == options.end()) {
      std::string known;
      for (const auto& [k, v] : options.items()) known += (known.empty() ? "" : ", ") + k;
      fail("{}.options: unknown switch '{}' for placement '{}' (known: {})", where, key, p.name, known);
    }
    const bool same_type = (it->is_number() && value.is_number()) || (it->is_boolean() && value.is_boolean()) ||
                           (it->is_string() && value.is_string());
    if (!same_type) fail("{}.options.{}: expected a value like {}, got {}", where, key, it->dump(), value.dump());
    const std::vector<std::string> choices = switch_choices(p, key);
    if (!choices.empty() && std::find(choices.begin(), choices.end(), value.get<std::string>()) == choices.end())
      fail("{}.options.{}: '{}' is not one of: {}", where, key, printable(value.get<std::string>(), 60),
           fmt::join(choices, ", "));
    *it = value;
  }
  return options;
}

}  // namespace

ModelConfig read_model_config(const Json& user, const std::string& where) {
  ModelConfig c;
  if (!user.is_object()) fail("{}: expected an object {{...}}", where);
  if (user.contains("placement") && is_formula(user["placement"]))
    c.placement = PlacementRef(Formula::read(user["placement"], where + ".placement"));
  else if (user.contains("placement") && user["placement"].is_string()) try {
      c.placement = PlacementRef(find_placement(user["placement"].get<std::string>()));  // the one lookup by name
    } catch (const Error& e) {
      fail("{}.placement: {}", where, e.what());
    }
  const Placement& placement = placement_of(c);
  Json section = Json::parse(placement.defaults);
  section.merge_patch(user);
  ConfigReader r(section, where);
  r.read("shape", c.shape, kShapes);
  r.read("vocab_size", c.vocab_size, 0, 1 << 24);
  r.read("d_model", c.d_model, 1, 1 << 16);
  r.read("n_layers", c.n_layers, 1, 1024);
  r.read("encoder_layers", c.encoder_layers, 0, 1024);
  r.read("label_smoothing", c.label_smoothing, 0.0, 0.99);
  r.read("n_heads", c.n_heads, 1, 1024);
  r.read("d_ff", c.d_ff, 1, 1 << 18);
  r.read("max_seq_len", c.max_seq_len, 1, 1 << 16);
  r.section("norm", [&](ConfigReader& n) {
    n.read("type", c.norm.type, norm_type_names());
    n.read("eps", c.norm.eps, 0.0, 1.0);
    n.read("bias", c.norm.bias);
  });
  if (c.placement.formula()) {
    r.raw("placement");
  } else {
    std::string name(c.placement.name());  // resolved above; read again so that the key counts as read
    r.read("placement", name, placement_names());
  }
  r.read("final_norm", c.final_norm);
  r.read("embed_norm", c.embed_norm);
  r.read("embed_scale", c.embed_scale, kEmbedScales);
  r.read("activation", c.activation, kActivations);
  r.read("positions", c.positions, kPositions);
  r.read("rope_base", c.rope_base, 1.0, 1e12);
  r.read("tied_embeddings", c.tied_embeddings);
  r.read("bias", c.bias);
  r.read("dropout", c.dropout, 0.0, 0.99);
  r.section("init", [&](ConfigReader& i) {
    i.read("scheme", c.init.scheme, {"gpt2", "scaled", "xavier"});
    i.read("std", c.init.std, 0.0, 10.0);
    i.read("embed_std", c.init.embed_std, 0.0, 10.0);
    i.read("xavier", c.init.xavier, {"uniform", "normal"});
    i.read("head", c.init.head, {"auto", "xavier_uniform", "xavier_normal", "normal"});
    i.read("head_std", c.init.head_std, 0.0, 10.0);
    i.read("from_pre_ln", c.init.from_pre_ln);
  });
  Json given = Json::object();
  r.read("options", given);
  c.options = resolve_options(placement, given, where);
  r.finish();
  validate(c, where);
  return c;
}

void validate(const ModelConfig& c, const std::string& where) {
  if (c.d_model % c.n_heads != 0)
    fail("{}: n_heads = {} does not divide d_model = {}; choose n_heads among the divisors of d_model", where,
         c.n_heads, c.d_model);
  if (c.positions == Positions::rope && c.head_dim() % 2 != 0)
    fail("{}: rope needs an even head size, but d_model / n_heads = {}", where, c.head_dim());
  const Placement& p = placement_of(c);
  if (c.placement.formula()) c.placement.formula()->check(c, where);
  if (c.encoder_layers > 0 && !c.encoder_decoder())
    fail("{}: encoder_layers = {} applies to shape 'encoder_decoder' only (this model is a '{}'): remove it", where,
         c.encoder_layers, name(c.shape));
  if ((c.norm.type == "crmsnorm") != p.compressed_stream)
    fail("{}: norm.type 'crmsnorm' and placement 'pre_crms' go together (the compressed stream needs CRMSNorm)", where);
  if (c.init.from_pre_ln && !p.compressed_stream)
    fail(
        "{}: init.from_pre_ln applies to placement 'pre_crms' only (it starts from a converted Pre-LN init): remove it",
        where);
  if (c.init.head != "auto" && c.tied_embeddings)
    fail(
        "{}: init.head = '{}' needs tied_embeddings = false (a tied head is the embedding, drawn by "
        "init.embed_std)",
        where, c.init.head);
  if (c.init.head_std > 0 && c.init.head != "normal")
    fail("{}: init.head_std = {} is used only with init.head = 'normal' (now '{}')", where, c.init.head_std,
         c.init.head);
  if (p.compressed_stream && c.tied_embeddings)
    fail("{}: placement 'pre_crms' needs tied_embeddings = false (the compressed head differs from the embedding)",
         where);
}

void set_placement(ModelConfig& c, std::string_view name) { c.placement = PlacementRef(find_placement(name)); }

Json to_json(const ModelConfig& c) {
  Json options = c.options;
  for (auto table : {common_switches(), placement_of(c).switches})
    for (const Switch& s : table)
      if (auto it = options.find(std::string(s.name));
          !s.written_when_default && it != options.end() && *it == Json::parse(s.default_json))
        options.erase(it);
  Json out{{"shape", name_of(c.shape, kShapes)},
           {"vocab_size", c.vocab_size},
           {"d_model", c.d_model},
           {"n_layers", c.n_layers},
           {"n_heads", c.n_heads},
           {"d_ff", c.d_ff},
           {"max_seq_len", c.max_seq_len},
           {"norm", {{"type", c.norm.type}, {"eps", c.norm.eps}, {"bias", c.norm.bias}}},
           {"placement", c.placement.json()},
           {"final_norm", c.has_final_norm()},
           {"embed_norm", c.embed_norm},
           {"embed_scale", name_of(c.embed_scale, kEmbedScales)},
           {"activation", name_of(c.activation, kActivations)},
           {"positions", name_of(c.positions, kPositions)},
           {"rope_base", c.rope_base},
           {"tied_embeddings", c.tied_embeddings},
           {"bias", c.bias},
           {"dropout", c.dropout},
           {"init",
            {{"scheme", c.init.scheme},
             {"xavier", c.init.xavier},
             {"std", c.init.std},
             {"embed_std", c.init.embed_std},
             {"head", c.init.head},
             {"head_std", c.init.head_std}}},
           {"options", options}};
  if (c.encoder_decoder()) out["encoder_layers"] = c.source_layers();
  if (c.label_smoothing > 0) out["label_smoothing"] = c.label_smoothing;
  if (c.init.from_pre_ln) out["init"]["from_pre_ln"] = true;  // only when set: older configs keep their text
  return out;
}

}  // namespace normlab::model
