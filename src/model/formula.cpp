#include "model/formula.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "io/atomic_file.h"
#include "model/formula_expr.h"
#include "model/init.h"
#include "model/norm.h"

namespace normlab::model {

using formula::Expr;
using formula::FormulaError;
using formula::Parsed;
using formula::Source;

namespace {

// The names a formula can use besides its own lets and learned coefficients.
constexpr std::array<std::string_view, 6> kVariables = {"L", "l", "d", "N", "M", "sigma"};
constexpr std::array<std::string_view, 8> kFunctions = {"sqrt", "ln", "exp", "abs", "floor", "ceil", "min", "max"};
constexpr std::array<std::string_view, 2> kVerbs = {"branch", "norm"};
// Where norm(...) puts its parameters (`layers.{i}.{s}.{site}.*`), and the two norms inside F that branch(...) can
// switch on: Sub-LN's over the heads before W_O, and the one over d_ff before fc2.
constexpr std::array<std::string_view, 3> kSites = {"in_norm", "out_norm", "post_norm"};
constexpr std::array<std::string_view, 2> kBranchSites = {"inner_norm", "mid_norm"};
// Names of tensors inside a sub-layer that a learned coefficient (`layers.{i}.{s}.{name}`) must not take.
constexpr std::array<std::string_view, 17> kTaken = {"q",   "k",     "v",          "o",        "fc1",      "gate",
                                                     "fc2", "heads", "act",        "dropout",  "centered", "attn",
                                                     "ffn", "cross", "head_scale", "qk_scale", "embed"};
constexpr std::array<std::string_view, 3> kStacks = {"single", "encoder", "decoder"};

template <size_t N>
bool among(const std::array<std::string_view, N>& list, std::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

template <size_t N>
std::string listed(const std::array<std::string_view, N>& list) {
  return fmt::format("{}", fmt::join(list, ", "));
}

std::string_view stack_key(StackSpec::Kind kind) { return kStacks[static_cast<size_t>(kind)]; }

enum class Type { number, learned, tensor };

std::string_view type_name(Type t) {
  return t == Type::number ? "a number" : t == Type::learned ? "a learned coefficient" : "a tensor";
}

// The values of the names every formula knows, for one sub-layer or one stack.
struct Vars {
  double L = 0, l = 0, d = 0, N = 0, M = 0, sigma = 0;
  StackSpec::Kind stack = StackSpec::single;
};

Vars vars_of(const ModelConfig& c, const StackSpec& t) {
  const double depth = t.layers;
  return {
      depth,      0,     double(c.d_model), c.encoder_decoder() ? double(c.source_layers()) : depth, double(c.n_layers),
      c.init.std, t.kind};
}

struct Let {
  std::map<std::string, Parsed> by_stack;  // key "" = every stack, else single | encoder | decoder
};

struct Learned {
  Parsed init;
  bool per_layer = false;  // one per layer (`layers.{i}.{name}`), shared by its sub-layers
  bool vector = false;     // [d] rather than [1]
};

struct Rule {
  enum class Action { xavier, normal, truncated_normal, uniform, scale } action;
  std::string key;  // its JSON key (xavier_gain, normal_std ...)
  std::vector<engine::Role> roles;
  std::vector<Branch> branches;  // empty: every parameter of the stack
  Parsed value;
  bool xavier_normal = true;
  bool with_biases = false;
  bool per_layer = false;  // applied layer by layer: its value uses l, or it names branches
};

engine::Role role_named(const std::string& name, const std::string& where) {
  using engine::Role;
  for (Role r : {Role::embedding, Role::q, Role::k, Role::v, Role::o, Role::fc1, Role::gate, Role::fc2, Role::head,
                 Role::norm_gain, Role::norm_bias, Role::bias, Role::scalar})
    if (name == engine::role_name(r)) return r;
  fail(
      "{}: unknown role '{}' (roles: embedding, q, k, v, o, fc1, gate, fc2, head, norm_gain, norm_bias, bias, "
      "scalar)",
      where, printable(name, 40));
}

bool is_matrix(engine::Role r) {
  using engine::Role;
  return r == Role::embedding || r == Role::q || r == Role::k || r == Role::v || r == Role::o || r == Role::fc1 ||
         r == Role::gate || r == Role::fc2 || r == Role::head;
}

}  // namespace

struct Formula::Impl {
  std::string name, about, where;
  Json json;
  std::array<std::optional<Parsed>, 3> sublayer;  // by Branch: attn, cross, ffn
  std::map<std::string, Let> lets;
  std::map<std::string, Learned> learned;
  std::map<std::string, std::string> norm_types;  // site → norm type
  bool final_norm = true;
  std::vector<Rule> init;
  std::string defaults = "{}";
  // Filled by the checks: every node's type, and the site of every norm(...) call.
  std::map<const Expr*, Type> types;
  std::map<const Expr*, std::string> sites;
  std::string equations, init_rule;  // the Placement's texts
  Placement placement;

  const Parsed& formula_of(Branch b) const { return *sublayer[static_cast<size_t>(b)]; }
  const Parsed* let_value(const std::string& name, StackSpec::Kind stack) const {
    const Let& let = lets.at(name);
    auto it = let.by_stack.find("");
    if (it == let.by_stack.end()) it = let.by_stack.find(std::string(stack_key(stack)));
    return it == let.by_stack.end() ? nullptr : &it->second;
  }
  double number(const Expr& e, const Source& src, const Vars& v) const;
  // Calls fn on every node reachable from e, following the lets it names (every stack's value) once each.
  void visit(const Expr& e, const Source& src, const std::function<void(const Expr&, const Source&)>& fn,
             std::set<std::string>& seen) const;
  void visit(const Parsed& p, const std::function<void(const Expr&, const Source&)>& fn) const {
    std::set<std::string> seen;
    visit(p.root, p.source, fn, seen);
  }
};

namespace {

// Types every node of a formula, lets through their uses, and refuses what the language does not allow.
class Checker {
 public:
  explicit Checker(Formula::Impl& f) : f_(f) {}
  Type type(const Parsed& p) { return type(p.root, p.source); }

 private:
  [[noreturn]] static void error(const Source& src, const Expr& e, const std::string& message) {
    throw FormulaError(src, e.at, message);
  }

  // Every later pass over a formula (its evaluation, the sub-layer it builds) follows the lets it names, so the
  // bound on nesting counts the levels with the lets written out.
  void count_levels(const Source& src, const Expr& e, int levels) {
    if (depth_ + levels > kMaxNesting)
      error(src, e,
            fmt::format("with its lets written out, the formula nests deeper than {} levels: use fewer lets "
                        "inside lets, or shorter chains",
                        kMaxNesting));
    deepest_ = std::max(deepest_, depth_ + levels);
  }

  Type type(const Expr& e, const Source& src) {
    count_levels(src, e, 1);
    ++depth_;
    const Type t = compute(e, src);
    --depth_;
    f_.types[&e] = t;
    return t;
  }

  Type let_type(const Expr& use, const Source& src) {
    const std::string& name = use.name;
    if (auto it = known_.find(name); it != known_.end()) {
      count_levels(src, use, let_levels_[name]);
      return it->second;
    }
    if (!open_.insert(name).second) error(src, use, fmt::format("let '{}' is defined through itself", name));
    const int outer_deepest = std::exchange(deepest_, depth_);
    std::optional<Type> t;
    for (const auto& [stack, value] : f_.lets.at(name).by_stack) {
      const Type here = type(value);
      if (t && *t != here)
        error(value.source, value.root,
              fmt::format("let '{}' is {} here but {} in another stack", name, type_name(here), type_name(*t)));
      t = here;
    }
    open_.erase(name);
    let_levels_[name] = deepest_ - depth_;
    deepest_ = std::max(outer_deepest, deepest_);
    if (*t == Type::learned)
      error(src, use, fmt::format("let '{}' stands for a learned coefficient: use that name directly", name));
    if (*t == Type::tensor && !f_.lets.at(name).by_stack.contains(""))
      error(src, use, fmt::format("let '{}' is a tensor: per-stack values are for numbers only", name));
    return known_[name] = *t;
  }

  Type name_type(const Expr& e, const Source& src) {
    if (e.name == "x") return Type::tensor;
    if (among(kVariables, e.name)) return Type::number;
    if (f_.lets.contains(e.name)) return let_type(e, src);
    if (f_.learned.contains(e.name)) return Type::learned;
    if (among(kVerbs, e.name) || among(kFunctions, e.name))
      error(src, e, fmt::format("'{}' is called: write {}(...)", e.name, e.name));
    std::vector<std::string> known = {"x"};
    known.insert(known.end(), kVariables.begin(), kVariables.end());
    for (const auto& [name, let] : f_.lets) known.push_back(name);
    for (const auto& [name, learned] : f_.learned) known.push_back(name);
    error(src, e,
          fmt::format("unknown name '{}' (known: {}; new constants go in \"let\", learned coefficients in "
                      "\"learned\")",
                      e.name, fmt::join(known, ", ")));
  }

  Type binary_type(const Expr& e, const Source& src) {
    const Type a = type(e.args[0], src), b = type(e.args[1], src);
    const std::string& op = e.name;
    if (a == Type::number && b == Type::number) return Type::number;
    const auto refuse = [&](std::string_view why) -> Type {
      error(src, e, fmt::format("'{}' between {} and {}: {}", op, type_name(a), type_name(b), why));
    };
    if (op == "+" || op == "-") {
      if (a == Type::tensor && b == Type::tensor) return Type::tensor;
      return refuse(a == Type::learned || b == Type::learned ? "a learned coefficient can only multiply a tensor"
                                                             : "tensors add to tensors, numbers to numbers");
    }
    if (op == "*") {
      if ((a == Type::tensor) != (b == Type::tensor)) return Type::tensor;
      return refuse(a == Type::tensor ? "two tensors do not multiply (a number or a learned coefficient scales one)"
                                      : "a learned coefficient can only multiply a tensor");
    }
    if (op == "/") {
      if (a == Type::tensor && b == Type::number) return Type::tensor;
      return refuse("only a tensor or a number divides, and only by a number");
    }
    return refuse(op == "^" ? "powers are of numbers" : "comparisons are of numbers");
  }

  Type call_type(const Expr& e, const Source& src) {
    if (among(kFunctions, e.name)) {
      const size_t arity = e.name == "min" || e.name == "max" ? 2 : 1;
      if (e.args.size() != arity)
        error(src, e, fmt::format("{}() takes {} argument{}", e.name, arity, arity == 1 ? "" : "s"));
      for (const Expr& a : e.args)
        if (type(a, src) != Type::number) error(src, a, fmt::format("{}() is of numbers", e.name));
      return Type::number;
    }
    if (e.name == "branch" || e.name == "norm") {
      if (type(e.args[0], src) != Type::tensor)
        error(src, e.args[0], fmt::format("{}() takes a tensor (x, or an expression of it)", e.name));
      std::set<std::string> named;
      for (size_t i = 1; i < e.args.size(); ++i) site_argument(e, e.args[i], src, named);
      return Type::tensor;
    }
    if (among(kVariables, e.name) || f_.lets.contains(e.name) || f_.learned.contains(e.name) || e.name == "x")
      error(src, e, fmt::format("'{}' is a value, not a verb: write {}*(...) to scale", e.name, e.name));
    error(src, e,
          fmt::format("unknown verb '{}' (verbs: {}; functions of numbers: {})", e.name, listed(kVerbs),
                      listed(kFunctions)));
  }

  // branch(t, inner_norm, mid_norm) switches on the norms inside F; norm(t, site) names its site.
  void site_argument(const Expr& call, const Expr& a, const Source& src, std::set<std::string>& named) {
    const bool branch = call.name == "branch";
    const std::string expected = branch ? "the norm sites inside F: " + listed(kBranchSites)
                                        : "its site: " + listed(kSites) + " or a site of \"norms\"";
    if (!branch && call.args.size() > 2) error(src, call.args[2], "norm() takes a tensor and, after it, its site");
    if (a.kind != Expr::Kind::name) error(src, a, fmt::format("{}()'s further arguments name {}", call.name, expected));
    const bool known = branch ? among(kBranchSites, a.name) : among(kSites, a.name) || f_.norm_types.contains(a.name);
    if (!known) error(src, a, fmt::format("unknown {} site '{}' (known: {})", call.name, a.name, expected));
    if (!named.insert(a.name).second) error(src, a, fmt::format("site '{}' is named twice", a.name));
  }

  Type compute(const Expr& e, const Source& src) {
    switch (e.kind) {
      case Expr::Kind::number:
        return Type::number;
      case Expr::Kind::name:
        return name_type(e, src);
      case Expr::Kind::negate: {
        const Type t = type(e.args[0], src);
        if (t == Type::learned) error(src, e, "a learned coefficient can only multiply a tensor");
        return t;
      }
      case Expr::Kind::binary:
        return binary_type(e, src);
      case Expr::Kind::ternary: {
        if (type(e.args[0], src) != Type::number)
          error(src, e.args[0], "the condition of c ? a : b is a number (a comparison of constants)");
        const Type a = type(e.args[1], src), b = type(e.args[2], src);
        if (a != b || a == Type::learned)
          error(src, e, fmt::format("the arms of c ? a : b are {} and {}", type_name(a), type_name(b)));
        return a;
      }
      case Expr::Kind::call:
        return call_type(e, src);
    }
    return Type::number;
  }

  Formula::Impl& f_;
  std::map<std::string, Type> known_;
  std::map<std::string, int> let_levels_;  // how many levels a let adds where it is used
  std::set<std::string> open_;
  int depth_ = 0, deepest_ = 0;  // the levels open now, and the most open at once
};

}  // namespace

void Formula::Impl::visit(const Expr& e, const Source& src, const std::function<void(const Expr&, const Source&)>& fn,
                          std::set<std::string>& seen) const {
  fn(e, src);
  if (e.kind == Expr::Kind::name && lets.contains(e.name) && seen.insert(e.name).second)
    for (const auto& [stack, value] : lets.at(e.name).by_stack) visit(value.root, value.source, fn, seen);
  for (const Expr& a : e.args) visit(a, src, fn, seen);
}

double Formula::Impl::number(const Expr& e, const Source& src, const Vars& v) const {
  const auto arg = [&](size_t i) { return number(e.args[i], src, v); };
  switch (e.kind) {
    case Expr::Kind::number:
      return e.value;
    case Expr::Kind::name: {
      const std::string& n = e.name;
      if (n == "L") return v.L;
      if (n == "l") return v.l;
      if (n == "d") return v.d;
      if (n == "N") return v.N;
      if (n == "M") return v.M;
      if (n == "sigma") return v.sigma;
      const Parsed* value = let_value(n, v.stack);
      if (!value) throw FormulaError(src, e.at, fmt::format("let '{}' has no value for this stack", n));
      return number(value->root, value->source, v);
    }
    case Expr::Kind::negate:
      return -arg(0);
    case Expr::Kind::binary: {
      const std::string& op = e.name;
      const double a = arg(0), b = arg(1);
      if (op == "+") return a + b;
      if (op == "-") return a - b;
      if (op == "*") return a * b;
      if (op == "/") return a / b;
      if (op == "^") return std::pow(a, b);
      if (op == "<") return a < b;
      if (op == "<=") return a <= b;
      if (op == ">") return a > b;
      if (op == ">=") return a >= b;
      if (op == "==") return a == b;
      return a != b;
    }
    case Expr::Kind::ternary:
      return arg(0) != 0 ? arg(1) : arg(2);
    case Expr::Kind::call: {
      const std::string& f = e.name;
      if (f == "min") return std::min(arg(0), arg(1));
      if (f == "max") return std::max(arg(0), arg(1));
      const double a = arg(0);
      if (f == "sqrt") return std::sqrt(a);
      if (f == "ln") return std::log(a);
      if (f == "exp") return std::exp(a);
      if (f == "abs") return std::abs(a);
      if (f == "floor") return std::floor(a);
      return std::ceil(a);
    }
  }
  return 0;
}

namespace {

// A value as a formula's number: finite, or an error at the expression naming the sizes it was evaluated at.
double finite(const Formula::Impl& f, const Expr& e, const Source& src, const Vars& v) {
  const double value = f.number(e, src, v);
  if (!std::isfinite(value))
    throw FormulaError(src, e.at,
                       fmt::format("{} is {} at L = {}, l = {}, d = {}: it must be a finite number", formula::print(e),
                                   value, v.L, v.l, v.d));
  return value;
}
double finite(const Formula::Impl& f, const Parsed& p, const Vars& v) { return finite(f, p.root, p.source, v); }

// Builds one sub-layer from its formula with the SubLayer verbs, in the order the formula is written, so that a
// formula of a built-in placement creates the same nodes and parameters in the same order as its C++. A scaled
// tensor is kept pending until an add can fold the scale into its coefficients (α·a + β·b is one node, as
// SubLayer::add), or a verb needs it.
class SubLayerBuilder {
 public:
  SubLayerBuilder(const Formula::Impl& f, const SubLayer& s, TensorId h) : f_(f), s_(s), h_(h) {
    vars_ = vars_of(s.config(), s.spec());
    vars_.l = s.layer();
  }

  TensorId run(const Parsed& p) {
    const TensorId out = materialize(eval(p.root, p.source));
    if (branches_ != 1)
      throw FormulaError(p.source, 0,
                         fmt::format("the {} sub-layer of layer {} calls branch(...) {} times; a sub-layer calls it "
                                     "once",
                                     branch_name(s_.kind()), s_.layer(), branches_));
    return out;
  }

 private:
  struct Term {
    TensorId t = engine::kNoTensor;
    double coef = 1;                       // a constant factor not yet applied
    TensorId learned = engine::kNoTensor;  // a learned factor not yet applied (then coef is 1)
  };

  std::string next(const std::string& base, int& count) const {
    return ++count == 1 ? base : fmt::format("{}_{}", base, count);
  }

  TensorId materialize(const Term& term) {
    TensorId t = term.t;
    if (term.learned != engine::kNoTensor)
      t = s_.scale_add(engine::kNoTensor, t, term.learned, next("scaled", scales_));
    if (term.coef != 1) t = s_.scale(t, term.coef, next("scaled", scales_));
    return t;
  }

  double number(const Expr& e, const Source& src) const { return finite(f_, e, src, vars_); }

  TensorId learned(const Expr& name) {
    const Learned& decl = f_.learned.at(name.name);
    const double init = finite(f_, decl.init, vars_);
    return decl.vector ? s_.vector(name.name, s_.config().stream_width(), init)
                       : s_.scalar(name.name, init, decl.per_layer);
  }

  Term negated(Term t) {
    if (t.learned != engine::kNoTensor) t = {materialize(t)};
    t.coef = -t.coef;
    return t;
  }

  Term sum(const Term& a, const Term& b) {
    if (b.learned != engine::kNoTensor && a.learned == engine::kNoTensor && a.coef == 1)
      return {s_.scale_add(a.t, b.t, b.learned, next("residual", adds_))};
    if (a.learned != engine::kNoTensor && b.learned == engine::kNoTensor && b.coef == 1)
      return {s_.scale_add(b.t, a.t, a.learned, next("residual", adds_))};
    const TensorId ta = a.learned != engine::kNoTensor ? materialize(a) : a.t;
    const TensorId tb = b.learned != engine::kNoTensor ? materialize(b) : b.t;
    return {s_.add(ta, tb, a.learned != engine::kNoTensor ? 1 : a.coef, b.learned != engine::kNoTensor ? 1 : b.coef,
                   next("residual", adds_))};
  }

  Term product(const Expr& e, const Source& src) {
    const Expr &left = e.args[0], &right = e.args[1];
    const Type lt = f_.types.at(&left);
    if (lt == Type::tensor) {  // t * c, t / c, t * a: the tensor is built first, as written
      Term t = eval(left, src);
      if (f_.types.at(&right) == Type::learned) return scaled_by(t, learned(right));
      if (t.learned != engine::kNoTensor) t = {materialize(t)};
      const double c = number(right, src);
      t.coef = e.name == "*" ? t.coef * c : t.coef / c;
      return finite_scale(t, e, src);
    }
    if (lt == Type::learned) {
      const TensorId p = learned(left);
      return scaled_by(eval(right, src), p);
    }
    const double c = number(left, src);
    Term t = eval(right, src);
    if (t.learned != engine::kNoTensor) t = {materialize(t)};
    t.coef = c * t.coef;
    return finite_scale(t, e, src);
  }

  // A tensor scaled by an infinite or NaN number (x/0) would only show up as NaN gradients: refused at its column.
  Term finite_scale(const Term& t, const Expr& e, const Source& src) const {
    if (!std::isfinite(t.coef))
      throw FormulaError(src, e.at,
                         fmt::format("{} scales a tensor by {}, which is not finite, at L = {}, l = {}, d = {}: divide "
                                     "by a number that is not 0",
                                     formula::print(e), t.coef, vars_.L, vars_.l, vars_.d));
    return t;
  }

  Term scaled_by(const Term& t, TensorId p) {
    return {t.learned != engine::kNoTensor || t.coef != 1 ? materialize(t) : t.t, 1, p};
  }

  Term call(const Expr& e, const Source& src) {
    const TensorId in = materialize(eval(e.args[0], src));
    if (e.name == "branch") {
      BranchStyle style;
      for (size_t i = 1; i < e.args.size(); ++i) {
        if (e.args[i].name == "inner_norm") style.inner_norm = s_.kind() != Branch::ffn;
        if (e.args[i].name == "mid_norm") style.mid_norm = s_.kind() == Branch::ffn;
      }
      if (++branches_ > 1)
        throw FormulaError(src, e.at, "this sub-layer calls branch(...) a second time; a sub-layer calls it once");
      return {s_.branch(in, style)};
    }
    const std::string& site = f_.sites.at(&e);
    if (!built_sites_.insert(site).second)
      throw FormulaError(src, e.at,
                         fmt::format("norm site '{}' is built twice in one sub-layer: name one of them, e.g. "
                                     "norm(..., out_norm), or declare another site in \"norms\"",
                                     site));
    NormSpec spec;
    if (auto it = f_.norm_types.find(site); it != f_.norm_types.end()) spec.type = it->second;
    return {s_.norm(site, in, spec)};
  }

  Term eval(const Expr& e, const Source& src) {
    switch (e.kind) {
      case Expr::Kind::name: {
        if (e.name == "x") return {h_};
        const Parsed& value = f_.lets.at(e.name).by_stack.at("");
        return eval(value.root, value.source);
      }
      case Expr::Kind::negate:
        return negated(eval(e.args[0], src));
      case Expr::Kind::binary: {
        if (e.name == "*" || e.name == "/") return product(e, src);
        const Term a = eval(e.args[0], src), b = eval(e.args[1], src);
        return sum(a, e.name == "-" ? negated(b) : b);
      }
      case Expr::Kind::ternary:
        return eval(number(e.args[0], src) != 0 ? e.args[1] : e.args[2], src);
      case Expr::Kind::call:
        return call(e, src);
      case Expr::Kind::number:
        break;
    }
    throw FormulaError(src, e.at, "internal: a number where the checks found a tensor");
  }

  const Formula::Impl& f_;
  const SubLayer& s_;
  TensorId h_;
  Vars vars_;
  int branches_ = 0, adds_ = 0, scales_ = 0;
  std::set<std::string> built_sites_;
};

// ---- reading ---------------------------------------------------------------------------------------------------

Parsed expression(const Json& value, const std::string& where, const std::string& field) {
  if (value.is_number()) return formula::parse({where, field, value.dump()});
  if (!value.is_string())
    fail("{}: {}: expected an expression as a string, e.g. \"(2*L)^0.25\", or a number; got {}", where, field,
         printable(value.dump(), 60));
  return formula::parse({where, field, value.get<std::string>()});
}

void check_keys(const Json& object, const std::string& where, std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : object.items())
    if (std::find(known.begin(), known.end(), key) == known.end())
      fail("{}: unknown key '{}' (known keys: {})", where, printable(key, 40), fmt::join(known, ", "));
}

const Json& object_at(const Json& doc, const std::string& key, const std::string& where) {
  const Json& v = doc.at(key);
  if (!v.is_object()) fail("{}.{}: expected an object {{...}}, got {}", where, key, printable(v.dump(), 60));
  return v;
}

bool reserved(const std::string& name) {
  return name == "x" || among(kVariables, name) || among(kFunctions, name) || among(kVerbs, name) ||
         among(kTaken, name) || name.ends_with("_norm") || name.starts_with("residual") || name.starts_with("scaled");
}

void check_new_name(const std::string& name, const std::string& where) {
  if (!formula::is_identifier(name))
    fail("{}: '{}' is not a name (letters, digits and _, starting with a letter)", where, printable(name, 40));
  if (reserved(name))
    fail(
        "{}: '{}' is taken (x, {}, the verbs and functions, and the tensor names inside a sub-layer: {}, *_norm, "
        "residual*, scaled*): choose another name",
        where, name, listed(kVariables), listed(kTaken));
}

void read_name(Formula::Impl& f, const Json& doc) {
  if (!doc.contains("name") || !doc["name"].is_string())
    fail("{}: a formula needs a \"name\" (letters, digits, . _ + -), e.g. \"name\": \"my-deepnorm\"", f.where);
  f.name = doc["name"].get<std::string>();
  const bool valid = !f.name.empty() && f.name.size() <= 64 && std::isalpha(static_cast<unsigned char>(f.name[0])) &&
                     std::all_of(f.name.begin(), f.name.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("._+-", c);
                     });
  if (!valid)
    fail("{}: name '{}' must start with a letter and hold up to 64 letters, digits and . _ + - (it names run folders)",
         f.where, printable(f.name, 80));
  const std::vector<std::string> builtins = placement_names();
  if (std::find(builtins.begin(), builtins.end(), f.name) != builtins.end())
    fail("{}: name '{}' is a built-in placement's: choose another (e.g. my-{})", f.where, f.name, f.name);
}

void read_lets(Formula::Impl& f, const Json& doc) {
  if (!doc.contains("let")) return;
  for (const auto& [name, value] : object_at(doc, "let", f.where).items()) {
    const std::string field = "let." + name;
    check_new_name(name, f.where + ": " + field);
    Let let;
    if (!value.is_object()) {
      let.by_stack.emplace("", expression(value, f.where, field));
    } else {
      check_keys(value, f.where + ": " + field, {"single", "encoder", "decoder"});
      if (value.empty())
        fail("{}: {}: give a value for each stack: \"single\", \"encoder\", \"decoder\"", f.where, field);
      for (const auto& [stack, text] : value.items())
        let.by_stack.emplace(stack, expression(text, f.where, field + "." + stack));
    }
    f.lets.emplace(name, std::move(let));
  }
}

void read_learned(Formula::Impl& f, const Json& doc) {
  if (!doc.contains("learned")) return;
  for (const auto& [name, spec] : object_at(doc, "learned", f.where).items()) {
    const std::string at = f.where + ": learned." + name;
    check_new_name(name, at);
    if (f.lets.contains(name)) fail("{}: '{}' is also a let; a name is one or the other", at, name);
    if (!spec.is_object() || !spec.contains("init"))
      fail("{}: expected {{\"init\": \"0\", \"per\": \"sublayer\" | \"layer\", \"shape\": \"scalar\" | \"vector\"}}",
           at);
    check_keys(spec, at, {"init", "per", "shape"});
    Learned l{expression(spec["init"], f.where, "learned." + name + ".init")};
    const std::string per = spec.value("per", "sublayer"), shape = spec.value("shape", "scalar");
    if (per != "sublayer" && per != "layer") fail("{}.per: '{}' is not one of sublayer, layer", at, per);
    if (shape != "scalar" && shape != "vector") fail("{}.shape: '{}' is not one of scalar, vector", at, shape);
    l.per_layer = per == "layer", l.vector = shape == "vector";
    if (l.per_layer && l.vector) fail("{}: a coefficient shared by a layer's sub-layers is a scalar", at);
    f.learned.emplace(name, std::move(l));
  }
}

void read_norms(Formula::Impl& f, const Json& doc) {
  if (!doc.contains("norms")) return;
  for (const auto& [site, type] : object_at(doc, "norms", f.where).items()) {
    const std::string at = f.where + ": norms." + site;
    if (among(kBranchSites, site))
      fail("{}: {} sits inside F and takes model.norm.type; \"norms\" types the sites of norm(...)", at, site);
    if (!formula::is_identifier(site) || !site.ends_with("_norm") ||
        among(std::array<std::string_view, 5>{"q_norm", "k_norm", "v_norm", "final_norm", "embed_norm"}, site))
      fail(
          "{}: a site is a name ending in _norm other than q_norm, k_norm, v_norm, final_norm, embed_norm (e.g. "
          "in_norm, out_norm, post_norm, ffn_norm)",
          at);
    if (!type.is_string()) fail("{}: expected a norm type name, e.g. \"rmsnorm\"", at);
    const std::string name = type.get<std::string>();
    // crmsnorm reads the compressed stream that only placement pre_crms makes: not a type a formula's site takes,
    // so it is not listed among them either.
    std::vector<std::string> types = norm_type_names();
    std::erase(types, "crmsnorm");
    if (name == "crmsnorm")
      fail(
          "{}: crmsnorm needs the compressed stream of placement pre_crms, which a formula does not make; give one "
          "of: {}",
          at, fmt::join(types, ", "));
    if (std::find(types.begin(), types.end(), name) == types.end())
      fail("{}: unknown norm type '{}' (known: {})", at, printable(name, 40), fmt::join(types, ", "));
    f.norm_types.emplace(site, name);
  }
}

void read_init(Formula::Impl& f, const Json& doc) {
  if (!doc.contains("init")) return;
  if (!doc["init"].is_array())
    fail("{}: init: expected a list of rules, e.g. [{{\"roles\": [\"v\", \"o\"], \"xavier_gain\": \"(8*L)^-0.25\"}}]",
         f.where);
  constexpr std::array<std::pair<std::string_view, Rule::Action>, 5> kActions = {{
      {"xavier_gain", Rule::Action::xavier},
      {"normal_std", Rule::Action::normal},
      {"truncated_normal_std", Rule::Action::truncated_normal},
      {"uniform_bound", Rule::Action::uniform},
      {"scale", Rule::Action::scale},
  }};
  for (size_t i = 0; i < doc["init"].size(); ++i) {
    const Json& spec = doc["init"][i];
    const std::string field = fmt::format("init[{}]", i), at = f.where + ": " + field;
    if (!spec.is_object()) fail("{}: expected a rule object {{\"roles\": [...], \"scale\": \"...\"}}", at);
    check_keys(spec, at,
               {"roles", "branches", "xavier_gain", "xavier", "normal_std", "truncated_normal_std", "uniform_bound",
                "scale", "with_biases"});
    std::optional<Rule> rule;
    for (const auto& [key, action] : kActions) {
      if (!spec.contains(key)) continue;
      if (rule) fail("{}: one rule does one thing: {} and {} are two rules", at, rule->key, key);
      rule = Rule{action, std::string(key), {}, {}, expression(spec[key], f.where, field + "." + std::string(key))};
    }
    if (!rule) fail("{}: a rule needs one of xavier_gain, normal_std, truncated_normal_std, uniform_bound, scale", at);
    if (!spec.contains("roles") || !spec["roles"].is_array() || spec["roles"].empty())
      fail("{}: roles: expected a non-empty list of parameter roles, e.g. [\"v\", \"o\", \"fc1\", \"fc2\"]", at);
    for (const Json& r : spec["roles"]) {
      if (!r.is_string()) fail("{}.roles: expected role names, got {}", at, printable(r.dump(), 40));
      const engine::Role role = role_named(r.get<std::string>(), at + ".roles");
      if (rule->action == Rule::Action::xavier && !is_matrix(role))
        fail("{}.roles: '{}' is not a matrix; Xavier draws matrices only", at, r.get<std::string>());
      rule->roles.push_back(role);
    }
    if (spec.contains("branches")) {
      if (!spec["branches"].is_array() || spec["branches"].empty())
        fail("{}.branches: expected a list of attn, cross, ffn", at);
      for (const Json& b : spec["branches"]) {
        const std::string name = b.is_string() ? b.get<std::string>() : b.dump();
        if (name != "attn" && name != "cross" && name != "ffn")
          fail("{}.branches: '{}' is not one of attn, cross, ffn", at, printable(name, 40));
        rule->branches.push_back(name == "attn" ? Branch::attn : name == "cross" ? Branch::cross : Branch::ffn);
      }
    }
    if (spec.contains("xavier")) {
      if (rule->action != Rule::Action::xavier) fail("{}: xavier (normal | uniform) goes with xavier_gain", at);
      const Json& form = spec["xavier"];
      if (form != "normal" && form != "uniform") fail("{}.xavier: expected \"normal\" or \"uniform\"", at);
      rule->xavier_normal = form == "normal";
    }
    if (spec.contains("with_biases")) {
      if (rule->action != Rule::Action::scale || !spec["with_biases"].is_boolean())
        fail("{}: with_biases (true | false) goes with scale: it scales each matrix's bias too", at);
      rule->with_biases = spec["with_biases"].get<bool>();
    }
    f.init.push_back(std::move(*rule));
  }
}

void read_defaults(Formula::Impl& f, const Json& doc) {
  if (!doc.contains("defaults")) return;
  const Json& defaults = object_at(doc, "defaults", f.where);
  if (defaults.contains("placement")) fail("{}: defaults: a formula's defaults cannot set the placement", f.where);
  // Checked as a model section of its own (keys, types, ranges); the user's fields go over them.
  Json probe = defaults;
  probe["placement"] = "pre";
  (void)read_model_config(probe, f.where + ": defaults");
  f.defaults = defaults.dump();
}

void read_sublayers(Formula::Impl& f, const Json& doc) {
  for (const char* key : {"sublayer", "attn", "cross", "ffn"})
    if (doc.contains(key)) {
      const Parsed p = expression(doc[key], f.where, key);
      const std::string k = key;
      if (k == "sublayer" || k == "attn") f.sublayer[size_t(Branch::attn)] = p;
      if (k == "sublayer" || k == "cross") f.sublayer[size_t(Branch::cross)] = p;
      if (k == "sublayer" || k == "ffn") f.sublayer[size_t(Branch::ffn)] = p;
    }
  // The shared formula stays where a branch's own was given (read first: "sublayer" comes before the branches).
  if (!f.sublayer[size_t(Branch::attn)] || !f.sublayer[size_t(Branch::ffn)])
    fail(
        "{}: a formula needs \"sublayer\" (every sub-layer's equation, e.g. \"x + branch(norm(x))\"), or both "
        "\"attn\" and \"ffn\"",
        f.where);
}

// The site a norm(...) call without one takes, from where it stands (the names docs/variants.md gives the built-in
// placements' norms): around F's output alone out_norm, around a sum holding F post_norm, else in_norm.
std::string inferred_site(const Formula::Impl& f, const Expr& call) {
  const Expr* arg = &call.args[0];
  for (;;) {
    if (arg->kind == Expr::Kind::negate) arg = &arg->args[0];
    else if (arg->kind == Expr::Kind::binary && (arg->name == "*" || arg->name == "/"))
      arg = &arg->args[f.types.at(&arg->args[0]) == Type::tensor ? 0 : 1];
    else if (arg->kind == Expr::Kind::name && f.lets.contains(arg->name))
      arg = &f.lets.at(arg->name).by_stack.at("").root;
    else break;
  }
  if (arg->kind == Expr::Kind::call && arg->name == "branch") return "out_norm";
  bool holds_branch = false;
  std::set<std::string> seen;
  f.visit(
      *arg, Source{},
      [&](const Expr& e, const Source&) { holds_branch |= e.kind == Expr::Kind::call && e.name == "branch"; }, seen);
  return holds_branch ? "post_norm" : "in_norm";
}

// Every equation gives the type its place needs: a tensor for a sub-layer, numbers elsewhere. Marks the init rules
// that vary by layer.
void check_types(Formula::Impl& f) {
  Checker checker(f);
  for (const auto& own : f.sublayer) {
    if (!own) continue;
    const Parsed& p = *own;
    const Type t = checker.type(p);
    if (t != Type::tensor)
      throw FormulaError(p.source, 0,
                         fmt::format("the sub-layer's equation is {}; it must give the next stream, a tensor "
                                     "(e.g. x + branch(norm(x)))",
                                     type_name(t)));
  }
  for (const auto& [name, let] : f.lets)
    for (const auto& [stack, value] : let.by_stack) {
      const Type t = checker.type(value);
      if (t != Type::number && !stack.empty()) throw FormulaError(value.source, 0, "a per-stack value is a number");
    }
  for (const auto& [name, learned] : f.learned)
    if (checker.type(learned.init) != Type::number)
      throw FormulaError(learned.init.source, 0, "an initial value is a number");
  for (Rule& r : f.init) {
    if (checker.type(r.value) != Type::number)
      throw FormulaError(r.value.source, 0, "an init rule's value is a number");
    bool uses_l = false;
    f.visit(r.value, [&](const Expr& e, const Source&) { uses_l |= e.kind == Expr::Kind::name && e.name == "l"; });
    r.per_layer = uses_l || !r.branches.empty();
  }
}

// Sites: every norm(...) call's, and the branch sites each branch kind has; a norms.SITE no norm has is refused.
void check_sites(Formula::Impl& f) {
  std::set<std::string> used;
  for (const Branch b : {Branch::attn, Branch::cross, Branch::ffn}) {
    const auto& own = f.sublayer[static_cast<size_t>(b)];
    if (!own) continue;
    // The shared "sublayer" formula may switch on both inner sites: each applies where F has it.
    const bool shared = own->source.field == "sublayer";
    f.visit(*own, [&](const Expr& e, const Source& src) {
      if (e.kind != Expr::Kind::call) return;
      if (e.name == "norm") {
        const std::string site = e.args.size() > 1 ? e.args[1].name : inferred_site(f, e);
        f.sites[&e] = site;
        used.insert(site);
      }
      if (e.name != "branch") return;
      for (size_t i = 1; i < e.args.size(); ++i) {
        const bool ffn = b == Branch::ffn, mid = e.args[i].name == "mid_norm";
        if (ffn != mid && !shared)
          throw FormulaError(src, e.args[i].at,
                             fmt::format("{} is {}; the {} formula's branch is {}", e.args[i].name,
                                         mid ? "the FFN's (a norm over d_ff before fc2)"
                                             : "attention's (a norm over the heads before W_O)",
                                         branch_name(b), ffn ? "the FFN" : "attention"));
      }
    });
  }
  for (const auto& [site, type] : f.norm_types)
    if (!used.contains(site))
      fail("{}: norms.{}: no norm(...) of the formula has this site (its sites: {})", f.where, site,
           fmt::join(used, ", "));
}

// A let or learned coefficient nothing uses is most likely a misspelling.
void check_every_name_used(const Formula::Impl& f) {
  std::set<std::string> named;
  const auto collect = [&](const Parsed& p) {
    f.visit(p, [&](const Expr& e, const Source&) {
      if (e.kind == Expr::Kind::name) named.insert(e.name);
    });
  };
  for (const auto& own : f.sublayer)
    if (own) collect(*own);
  for (const auto& [name, learned] : f.learned) collect(learned.init);
  for (const Rule& r : f.init) collect(r.value);
  for (const auto& [name, let] : f.lets)
    if (!named.contains(name)) fail("{}: let.{}: nothing in the formula uses it", f.where, name);
  for (const auto& [name, learned] : f.learned)
    if (!named.contains(name)) fail("{}: learned.{}: nothing in the formula uses it", f.where, name);
}

void check_formula(Formula::Impl& f) {
  check_types(f);
  check_sites(f);
  check_every_name_used(f);
}

// Each distinct equation with the branches it serves ("attn, cross, ffn" when one serves all), norm sites shown
// where `sites` holds them.
std::vector<std::pair<std::string, std::string>> equations_by_branch(const Formula::Impl& f,
                                                                     const std::map<const Expr*, std::string>& sites) {
  std::vector<std::pair<std::string, std::string>> out;
  for (Branch b : {Branch::attn, Branch::cross, Branch::ffn}) {
    const auto& own = f.sublayer[static_cast<size_t>(b)];
    if (!own) continue;
    const std::string text = formula::print(own->root, sites);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.second == text; });
    if (it == out.end()) out.emplace_back(branch_name(b), text);
    else it->first += fmt::format(", {}", branch_name(b));
  }
  return out;
}

std::string rule_text(const Rule& r) {
  std::vector<std::string> roles;
  for (engine::Role role : r.roles) roles.emplace_back(engine::role_name(role));
  std::string what = formula::print(r.value.root);
  switch (r.action) {
    case Rule::Action::xavier:
      what = fmt::format("Xavier-{}, gain {}", r.xavier_normal ? "normal" : "uniform", what);
      break;
    case Rule::Action::normal:
      what = fmt::format("N(0, std {})", what);
      break;
    case Rule::Action::truncated_normal:
      what = fmt::format("N(0, std {}) truncated at ±3 std", what);
      break;
    case Rule::Action::uniform:
      what = fmt::format("U(±{})", what);
      break;
    case Rule::Action::scale:
      what = fmt::format("× {}{}", what, r.with_biases ? " (biases too)" : "");
      break;
  }
  std::vector<std::string> branches;
  for (Branch b : r.branches) branches.emplace_back(branch_name(b));
  return fmt::format("{}{}: {}", fmt::join(roles, ", "),
                     branches.empty() ? std::string() : fmt::format(" in {}", fmt::join(branches, ", ")), what);
}

// The Placement a formula stands as: its texts (for `normlab variants check`, reports and init-report) and the
// functions that build and initialize it from the config's formula.
TensorId formula_sublayer(const SubLayer& s, TensorId h) { return s.config().placement.formula()->sublayer(s, h); }
void formula_init(InitContext& ctx) { ctx.model.config.placement.formula()->initialize(ctx); }

void describe_placement(Formula::Impl& f) {
  std::vector<std::string> parts;
  for (const auto& [branches, equation] : equations_by_branch(f, {}))
    parts.push_back(fmt::format("{}: x' = {}", branches, equation));
  for (const auto& [name, let] : f.lets)
    for (const auto& [stack, value] : let.by_stack)
      parts.push_back(
          fmt::format("{}{} = {}", name, stack.empty() ? "" : " (" + stack + ")", formula::print(value.root)));
  f.equations = fmt::format("{}", fmt::join(parts, ";  "));
  std::vector<std::string> rules;
  for (const Rule& r : f.init) rules.push_back(rule_text(r));
  f.init_rule = fmt::format("{}", fmt::join(rules, "; "));
  f.placement = Placement{
      .name = f.name,
      .paper = f.about.empty() ? std::string_view("a placement written as a formula (docs/variants.md)") : f.about,
      .equations = f.equations,
      .final_norm = f.final_norm,
      .defaults = f.defaults,
      .sublayer = formula_sublayer,
      .init = f.init.empty() ? nullptr : formula_init,
      .init_rule = f.init_rule,
      .init_source = f.init.empty() ? std::string_view() : std::string_view("the formula's init list"),
  };
}

Json document_of(const Json& value, std::string& where) {
  if (value.is_object()) return value;
  const std::string text = value.get<std::string>();
  if (!text.starts_with('@')) return Json{{"name", "formula"}, {"sublayer", text}};
  if (text.size() == 1) fail("{}: '@' names a formula file: @path/to/formula.json", where);
  where = text.substr(1);
  const std::string content = io::read_file(where, "formula file",
                                            "check the path after '@' (relative to the "
                                            "directory normlab runs in)");
  Json doc;
  try {
    doc = Json::parse(content);
  } catch (const Json::parse_error& e) {
    fail("{}: not valid JSON: {}", where, printable(e.what()));
  }
  check_nesting(content, where);
  return doc;
}

}  // namespace

bool is_formula(const Json& placement) {
  if (placement.is_object()) return true;
  if (!placement.is_string()) return false;
  const std::string text = placement.get<std::string>();
  return text.starts_with('@') || text.find('(') != std::string::npos;
}

std::shared_ptr<const Formula> Formula::read(const Json& value, const std::string& given_where) {
  std::string where = given_where;
  auto f = std::make_unique<Impl>();
  f->json = document_of(value, where);
  f->where = where;
  if (!f->json.is_object()) fail("{}: a formula is a JSON object {{\"name\": ..., \"sublayer\": ...}}", where);
  check_keys(f->json, where,
             {"name", "about", "sublayer", "attn", "cross", "ffn", "let", "learned", "norms", "final_norm", "init",
              "defaults"});
  read_name(*f, f->json);
  if (f->json.contains("about")) {
    if (!f->json["about"].is_string()) fail("{}: about: expected a line of text", where);
    f->about = f->json["about"].get<std::string>();
  }
  if (f->json.contains("final_norm")) {
    if (!f->json["final_norm"].is_boolean()) fail("{}: final_norm: expected true or false", where);
    f->final_norm = f->json["final_norm"].get<bool>();
  }
  read_sublayers(*f, f->json);
  read_lets(*f, f->json);
  read_learned(*f, f->json);
  read_norms(*f, f->json);
  read_init(*f, f->json);
  read_defaults(*f, f->json);
  check_formula(*f);
  describe_placement(*f);
  return std::shared_ptr<const Formula>(new Formula(std::move(f)));
}

Formula::Formula(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Formula::~Formula() = default;

const std::string& Formula::name() const { return impl_->name; }
const Json& Formula::json() const { return impl_->json; }
const Placement& Formula::placement() const { return impl_->placement; }

void Formula::check(const ModelConfig& c, const std::string& where) const {
  if (c.encoder_decoder() && !impl_->sublayer[static_cast<size_t>(Branch::cross)])
    fail(
        "{}: formula {} has no equation for cross-attention, which an encoder_decoder needs: give \"cross\" (or "
        "\"sublayer\")",
        where, impl_->name);
  for (const auto& [name, let] : impl_->lets) {
    if (let.by_stack.contains("")) continue;
    for (const StackSpec& t : stacks(c))
      if (!let.by_stack.contains(std::string(stack_key(t.kind))))
        fail("{}: formula {}: let.{} has no \"{}\" value, which a model of shape {} needs", where, impl_->name, name,
             stack_key(t.kind), model::name(c.shape));
  }
}

TensorId Formula::sublayer(const SubLayer& s, TensorId h) const {
  return SubLayerBuilder(*impl_, s, h).run(impl_->formula_of(s.kind()));
}

namespace {

// A rule none of whose roles any parameter of the model has (gate alone on a model without a gated FFN, head with
// tied embeddings) would do nothing without a word: refused, as an unused let is. A rule over several roles may name
// some the model lacks ([v, o, fc1, gate, fc2] serves gated and plain FFNs alike).
void check_rules_apply(const Formula::Impl& f, const Model& m) {
  std::set<engine::Role> present;
  for (engine::TensorId p : m.graph.parameters()) present.insert(m.graph.spec(p).role);
  present.erase(engine::Role::none);
  for (size_t i = 0; i < f.init.size(); ++i) {
    const std::vector<engine::Role>& roles = f.init[i].roles;
    if (std::any_of(roles.begin(), roles.end(), [&](engine::Role r) { return present.contains(r); })) continue;
    std::vector<std::string> named, have;
    for (engine::Role r : roles) named.emplace_back(engine::role_name(r));
    for (engine::Role r : present) have.emplace_back(engine::role_name(r));
    fail(
        "{}: init[{}].roles: no parameter of this model has the role{} {} (its roles: {}), so the rule would do "
        "nothing: drop the rule or name a role the model has",
        f.where, i, named.size() == 1 ? "" : "s", fmt::join(named, ", "), fmt::join(have, ", "));
  }
}

}  // namespace

void Formula::initialize(InitContext& ctx) const {
  Model& m = ctx.model;
  check_rules_apply(*impl_, m);
  for (const Rule& r : impl_->init)
    for (const StackSpec& t : stacks(m.config)) {
      Vars v = vars_of(m.config, t);
      const auto apply = [&](const std::string& under) {
        const double value = finite(*impl_, r.value, v);
        if (value < 0 && r.action != Rule::Action::scale)
          throw FormulaError(
              r.value.source, 0,
              fmt::format("{} is {} at L = {}, l = {}: a std, bound or gain is not negative", r.key, value, v.L, v.l));
        for (engine::Role role : r.roles) switch (r.action) {
            case Rule::Action::xavier:
              redraw_xavier(m, {role}, value, r.xavier_normal, ctx.seed, under);
              break;
            case Rule::Action::normal:
              redraw_normal(m, {role}, value, ctx.seed, under);
              break;
            case Rule::Action::truncated_normal:
              redraw_truncated_normal(m, {role}, value, ctx.seed, under);
              break;
            case Rule::Action::uniform:
              redraw_uniform(m, {role}, value, ctx.seed, under);
              break;
            case Rule::Action::scale:
              scale_roles(m, {role}, value, r.with_biases, under);
              break;
          }
      };
      if (!r.per_layer) {
        apply(t.prefix());
        continue;
      }
      for (int i = 0; i < t.layers; ++i) {
        v.l = i + 1;
        if (r.branches.empty()) apply(fmt::format("{}layers.{}.", t.prefix(), i));
        for (Branch b : t.branches())
          if (std::find(r.branches.begin(), r.branches.end(), b) != r.branches.end())
            apply(fmt::format("{}layers.{}.{}.", t.prefix(), i, branch_name(b)));
      }
    }
}

std::vector<std::string> Formula::describe() const {
  const Impl& f = *impl_;
  std::vector<std::string> lines;
  for (const auto& [branches, equation] : equations_by_branch(f, f.sites))
    lines.push_back(fmt::format("{:<18} x' = {}", branches + ":", equation));
  for (const auto& [name, let] : f.lets)
    for (const auto& [stack, value] : let.by_stack)
      lines.push_back(fmt::format("let {}{} = {}", name, stack.empty() ? "" : " (" + stack + " stack)",
                                  formula::print(value.root, f.sites)));
  for (const auto& [name, learned] : f.learned)
    lines.push_back(fmt::format("learned {}: {} per {}, starting at {}", name, learned.vector ? "[d] vector" : "scalar",
                                learned.per_layer ? "layer (shared by its sub-layers)" : "sub-layer",
                                formula::print(learned.init.root)));
  std::set<std::string> sites;
  for (const auto& [call, site] : f.sites) sites.insert(site);
  for (const std::string& site : sites) {
    const auto it = f.norm_types.find(site);
    lines.push_back(fmt::format("norm site {}: {}", site, it == f.norm_types.end() ? "model.norm.type" : it->second));
  }
  lines.push_back(fmt::format("final norm: {}", f.final_norm ? "yes" : "no"));
  for (const Rule& r : f.init) lines.push_back("init: " + rule_text(r));
  if (f.defaults != "{}") lines.push_back("defaults: " + f.defaults);
  return lines;
}

bool Formula::normalizes_stream() const {
  const Impl& f = *impl_;
  std::function<bool(const Expr&)> ends_in_norm = [&](const Expr& e) -> bool {
    if (e.kind == Expr::Kind::negate) return ends_in_norm(e.args[0]);
    if (e.kind == Expr::Kind::binary && (e.name == "*" || e.name == "/"))
      return ends_in_norm(e.args[f.types.at(&e.args[0]) == Type::tensor ? 0 : 1]);
    if (e.kind == Expr::Kind::ternary) return ends_in_norm(e.args[1]) || ends_in_norm(e.args[2]);
    if (e.kind == Expr::Kind::name && f.lets.contains(e.name))
      return ends_in_norm(f.lets.at(e.name).by_stack.at("").root);
    return e.kind == Expr::Kind::call && e.name == "norm";
  };
  return std::any_of(f.sublayer.begin(), f.sublayer.end(), [&](const auto& p) { return p && ends_in_norm(p->root); });
}

bool Formula::norm_free() const { return impl_->sites.empty(); }

}  // namespace normlab::model
