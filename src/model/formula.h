#pragma once
// A placement written as a formula rather than in C++ (docs/variants.md, "Your own placement: a formula"): a JSON
// object, given as `model.placement` inline or as "@file.json", that states each sub-layer's equation over the verbs
// the built-in placements use (the residual input x, branch(), norm() at a named site, constant or learned
// coefficients, constants over L, ℓ and d), whether a final norm follows the stack, and an init rule over parameter
// roles. It is read and checked whole before anything is built; a mistake is reported at its field and column. The
// model sees it as one more Placement (placement_of), built with the same SubLayer verbs, so a formula that states a
// built-in placement trains bit for bit like it.
#include <memory>
#include <string>
#include <vector>

#include "common/config_reader.h"
#include "model/placement.h"

namespace normlab::model {

class Formula {
 public:
  // Reads a model.placement value that is a formula (is_formula): an object, "@path" to a JSON file holding one, or
  // a bare sub-layer expression ("x + branch(norm(x))", named "formula"). `where` names it in errors (the file's path
  // for "@path"). Throws normlab::Error, formula::FormulaError for a mistake inside an expression.
  static std::shared_ptr<const Formula> read(const Json& value, const std::string& where);
  ~Formula();
  Formula(const Formula&) = delete;
  Formula& operator=(const Formula&) = delete;

  const std::string& name() const;
  // The formula as given (the file's object): what a run records as model.placement, so that rerunning it needs no
  // file.
  const Json& json() const;
  const Placement& placement() const;
  // The checks that depend on the model: a per-stack constant or the cross-attention formula an encoder-decoder
  // needs, norm types the stream allows.
  void check(const ModelConfig& c, const std::string& where) const;
  // The sub-layer and the init rule, as Placement::sublayer and Placement::init call them.
  TensorId sublayer(const SubLayer& s, TensorId h) const;
  void initialize(InitContext& ctx) const;
  // The formula as it was understood, one line per statement: the equations with every norm site named, the
  // constants, the learned coefficients, the norm sites and their types, the final norm and the init rules.
  std::vector<std::string> describe() const;
  // Its shape, for grouping: whether some sub-layer's output is a norm's (the stream is normalized after the add, as
  // Post-LN), and whether it has no norm() at all.
  bool normalizes_stream() const;
  bool norm_free() const;

  struct Impl;

 private:
  explicit Formula(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether a model.placement value states a formula rather than naming a built-in placement: an object, a string
// starting with '@' (a file), or an expression (a string with a '(').
bool is_formula(const Json& placement);

}  // namespace normlab::model
