#include "model/config.h"

#include "model/placement.h"

namespace normlab::model {

bool ModelConfig::has_final_norm() const { return final_norm.value_or(find_placement(placement).final_norm); }

ModelConfig read_model_config(const Json& section, const std::string& where) {
  ModelConfig c;
  ConfigReader r(section, where);
  r.read("vocab_size", c.vocab_size, 0, 1 << 24);
  r.read("d_model", c.d_model, 1, 1 << 16);
  r.read("n_layers", c.n_layers, 1, 1024);
  r.read("n_heads", c.n_heads, 1, 1024);
  r.read("d_ff", c.d_ff, 1, 1 << 18);
  r.read("max_seq_len", c.max_seq_len, 1, 1 << 16);
  r.section("norm", [&](ConfigReader& n) {
    n.read("type", c.norm.type, {"layernorm", "rmsnorm"});
    n.read("eps", c.norm.eps, 0.0, 1.0);
    n.read("bias", c.norm.bias);
  });
  r.read("placement", c.placement, placement_names());
  r.read("final_norm", c.final_norm);
  r.read("activation", c.activation, {"gelu", "swiglu"});
  r.read("positions", c.positions, {"learned", "rope"});
  r.read("rope_base", c.rope_base, 1.0, 1e12);
  r.read("tied_embeddings", c.tied_embeddings);
  r.read("bias", c.bias);
  r.read("dropout", c.dropout, 0.0, 0.99);
  r.section("init", [&](ConfigReader& i) {
    i.read("scheme", c.init.scheme, {"gpt2", "scaled", "xavier"});
    i.read("std", c.init.std, 0.0, 10.0);
    i.read("embed_std", c.init.embed_std, 0.0, 10.0);
  });
  r.read("options", c.options);
  r.finish();
  validate(c, where);
  return c;
}

void validate(const ModelConfig& c, const std::string& where) {
  if (c.d_model % c.n_heads != 0)
    fail("{}: n_heads = {} does not divide d_model = {}; choose n_heads among the divisors of d_model", where,
         c.n_heads, c.d_model);
  if (c.positions == "rope" && c.head_dim() % 2 != 0)
    fail("{}: rope needs an even head size, but d_model / n_heads = {}", where, c.head_dim());
}

Json to_json(const ModelConfig& c) {
  return Json{{"vocab_size", c.vocab_size},
              {"d_model", c.d_model},
              {"n_layers", c.n_layers},
              {"n_heads", c.n_heads},
              {"d_ff", c.d_ff},
              {"max_seq_len", c.max_seq_len},
              {"norm", {{"type", c.norm.type}, {"eps", c.norm.eps}, {"bias", c.norm.bias}}},
              {"placement", c.placement},
              {"final_norm", c.has_final_norm()},
              {"activation", c.activation},
              {"positions", c.positions},
              {"rope_base", c.rope_base},
              {"tied_embeddings", c.tied_embeddings},
              {"bias", c.bias},
              {"dropout", c.dropout},
              {"init", {{"scheme", c.init.scheme}, {"std", c.init.std}, {"embed_std", c.init.embed_std}}},
              {"options", c.options}};
}

}  // namespace normlab::model
