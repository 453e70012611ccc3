// Placements written as formulas (model/formula.h): what the reader understands, every kind of mistake it refuses
// (with the field and the column where it is), and what the model builds from a formula.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "model/formula.h"
#include "model/formula_expr.h"
#include "model/gradient_check.h"
#include "model/placement.h"
#include "model/transformer.h"

namespace normlab::model {
namespace {

namespace fs = std::filesystem;
using formula::FormulaError;

std::shared_ptr<const Formula> read(const Json& doc) { return Formula::read(doc, "test"); }

Json with(Json doc, const Json& patch) {
  doc.merge_patch(patch);
  return doc;
}

const Json kPre = {{"name", "f"}, {"sublayer", "x + branch(norm(x))"}};

// The error a formula raises: its message, and for a mistake inside an expression the field and column.
struct Refusal {
  std::string message, field;
  size_t column = 0;
};

Refusal refusal(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const FormulaError& e) {
    return {e.what(), e.field, e.column};
  } catch (const Error& e) {
    return {e.what()};
  }
  ADD_FAILURE() << "no error";
  return {};
}

Refusal refused(const Json& doc) {
  return refusal([&] { read(doc); });
}

// A mistake in the sub-layer expression, with where it is.
void expect_at(const std::string& sublayer, size_t column, const std::string& fragment) {
  SCOPED_TRACE(sublayer);
  const Refusal r = refused({{"name", "f"}, {"sublayer", sublayer}});
  EXPECT_EQ(r.field, "sublayer") << r.message;
  EXPECT_EQ(r.column, column) << r.message;
  EXPECT_NE(r.message.find(fragment), std::string::npos) << r.message;
  EXPECT_NE(r.message.find(fmt::format("column {}", column)), std::string::npos) << r.message;
}

ModelConfig config_of(const Json& formula, const Json& extra = Json::object()) {
  Json section = gradient_check_section();
  section["placement"] = formula;
  section.merge_patch(extra);
  return read_model_config(section, "model");
}

TEST(FormulaExpr, ParsesWithPrecedenceAndPrintsItAsUnderstood) {
  const auto p = [](const std::string& text) { return formula::print(formula::parse({"t", "f", text}).root); };
  EXPECT_EQ(p("alpha*x + branch(x)"), "(alpha*x) + branch(x)");
  EXPECT_EQ(p("(8*L)^-0.25"), "(8*L)^(-0.25)");
  EXPECT_EQ(p("-2^2"), "-(2^2)");
  EXPECT_EQ(p("1 - 2 - 3"), "(1 - 2) - 3");
  EXPECT_EQ(p("2^3^2"), "2^(3^2)");
  EXPECT_EQ(p("l <= floor(L/4) ? a : b + c"), "(l <= floor(L/4)) ? a : (b + c)");
  EXPECT_EQ(p("1.5e-3*x"), "1.5e-3*x");
}

TEST(FormulaExpr, RefusesMalformedTextAtItsColumn) {
  expect_at("norm(x + branch(x)", 19, "expected ')' to close norm(");
  expect_at("x + branch(x))", 14, "unexpected ')' after a complete expression");
  expect_at("x + $branch(x)", 5, "unexpected character '$'");
  expect_at("x + 2L*branch(x)", 5, "write 2*L");
  expect_at("x + ", 5, "the expression ends where a value is expected");
  expect_at("x + branch()", 12, "branch() needs an argument");
  expect_at("l > 1 ? x", 10, "expected ':'");
  expect_at("   ", 1, "empty expression");
}

// Issue 47.1: an expression nests at most kMaxNesting levels, or it would overflow the stack of the recursive
// parser and of every pass after it; deeper text is refused with the bound, the depth just under it reads.
TEST(FormulaExpr, RefusesNestingDeeperThanTheBound) {
  const auto parse = [](const std::string& text) { return formula::parse({"t", "f", text}); };
  const auto nested = [](int n) { return fmt::format("{}1{}", std::string(n, '('), std::string(n, ')')); };
  const auto chain = [](int n, const std::string& op) {
    std::string text = "1";
    for (int i = 1; i < n; ++i) text.append(op).append("1");
    return text;
  };
  const int fits = kMaxNesting - 10;
  EXPECT_NO_THROW(parse(nested(fits)));
  EXPECT_NO_THROW(parse(fmt::format("{}1", std::string(fits, '-'))));
  EXPECT_NO_THROW(parse(chain(fits, "+")));
  EXPECT_NO_THROW(parse(chain(fits, "^")));
  for (const std::string& text :
       {nested(5000), fmt::format("{}1", std::string(40000, '-')), chain(20000, "^"), chain(20000, "+"),
        chain(20000, "*"), fmt::format("sqrt({}) + {}", chain(fits, "+"), chain(fits, "+"))}) {
    SCOPED_TRACE(text.substr(0, 40));
    try {
      parse(text);
      ADD_FAILURE() << "parsed";
    } catch (const FormulaError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("nests deeper than {} levels", kMaxNesting)), std::string::npos)
          << e.what();
    }
  }
}

// The same bound holds with the lets written out: each let is short, but a chain of them is as deep as one long
// expression to every pass that follows them.
TEST(Formula, RefusesLetsThatNestDeeperThanTheBoundWrittenOut) {
  const auto lets = [](int n) {
    Json let = Json::object();
    for (int i = 0; i < n; ++i) let[fmt::format("a{}", i)] = i + 1 < n ? fmt::format("a{} + 1", i + 1) : "1";
    return with(kPre, {{"sublayer", "x + a0*branch(norm(x))"}, {"let", let}});
  };
  EXPECT_NO_THROW(read(lets(kMaxNesting / 4)));
  const Refusal deep = refused(lets(kMaxNesting));
  EXPECT_NE(
      deep.message.find(fmt::format("with its lets written out, the formula nests deeper than {} levels", kMaxNesting)),
      std::string::npos)
      << deep.message;
}

TEST(Formula, RefusesUnknownVerbsNamesAndSitesAtTheirColumn) {
  expect_at("x + brnch(norm(x))", 5, "unknown verb 'brnch' (verbs: branch, norm;");
  expect_at("x + beta*branch(x)", 5, "unknown name 'beta'");
  expect_at("x + branch(norm(x, foo_norm))", 20, "unknown norm site 'foo_norm'");
  expect_at("x + branch(norm(x), inner)", 21, "unknown branch site 'inner' (known: the norm sites inside F");
  expect_at("x + branch(norm(x), 2)", 21, "branch()'s further arguments name");
  expect_at("x + sqrt*branch(x)", 5, "'sqrt' is called: write sqrt(...)");
  expect_at("x + L(branch(x))", 5, "'L' is a value, not a verb");
}

TEST(Formula, RefusesWhatTheTypesDoNotAllow) {
  expect_at("x + 2", 3, "'+' between a tensor and a number");
  expect_at("x*branch(x)", 2, "two tensors do not multiply");
  expect_at("norm(2) + branch(x)", 6, "norm() takes a tensor");
  expect_at("x + branch(norm(x))/x", 20, "only a tensor or a number divides, and only by a number");
  expect_at("x ^ 2 + branch(x)", 3, "powers are of numbers");
  expect_at("x ? x : branch(x)", 1, "the condition of c ? a : b is a number");
  expect_at("L > 1 ? x : 2", 7, "the arms of c ? a : b are a tensor and a number");
  expect_at("x + sqrt(L, 2)*branch(x)", 5, "sqrt() takes 1 argument");
  expect_at("2*L", 1, "the sub-layer's equation is a number; it must give the next stream");
  const Refusal learned =
      refused({{"name", "f"}, {"sublayer", "x + 2*a*branch(x)"}, {"learned", {{"a", {{"init", "0"}}}}}});
  EXPECT_EQ(learned.column, 6) << learned.message;
  EXPECT_NE(learned.message.find("a learned coefficient can only multiply a tensor"), std::string::npos);
}

TEST(Formula, RefusesMistakesInLetsLearnedAndInitAtTheirField) {
  const Refusal cycle = refused(with(kPre, {{"sublayer", "x + a*branch(norm(x))"}, {"let", {{"a", "b"}, {"b", "a"}}}}));
  EXPECT_EQ(cycle.field, "let.b") << cycle.message;
  EXPECT_NE(cycle.message.find("let 'a' is defined through itself"), std::string::npos) << cycle.message;
  const Refusal let = refused(with(kPre, {{"sublayer", "x + a*branch(x)"}, {"let", {{"a", "(2*L"}}}}));
  EXPECT_EQ(let.field, "let.a");
  EXPECT_EQ(let.column, 5);
  const Refusal init = refused(with(kPre, {{"init", {{{"roles", {"v"}}, {"scale", "x"}}}}}));
  EXPECT_EQ(init.field, "init[0].scale");
  EXPECT_NE(init.message.find("an init rule's value is a number"), std::string::npos) << init.message;
  const Refusal role = refused(with(kPre, {{"init", {{{"roles", {"v", "vo"}}, {"scale", "2"}}}}}));
  EXPECT_NE(role.message.find("test: init[0].roles: unknown role 'vo' (roles: embedding, q, k, v, o"),
            std::string::npos)
      << role.message;
  EXPECT_NE(refused(with(kPre, {{"init", {{{"roles", {"bias"}}, {"xavier_gain", "1"}}}}}))
                .message.find("'bias' is not a matrix; Xavier draws matrices only"),
            std::string::npos);
  EXPECT_NE(refused(with(kPre, {{"init", {{{"roles", {"v"}}, {"scale", "2"}, {"normal_std", "1"}}}}}))
                .message.find("one rule does one thing: normal_std and scale are two rules"),
            std::string::npos);
  EXPECT_NE(
      refused(with(kPre, {{"let", {{"unused", "2"}}}})).message.find("let.unused: nothing in the formula uses it"),
      std::string::npos);
  EXPECT_NE(refused(with(kPre, {{"learned", {{"x", {{"init", "0"}}}}}})).message.find("'x' is taken"),
            std::string::npos);
  EXPECT_NE(refused(with(kPre, {{"learned", {{"a", {{"init", "0"}, {"per", "block"}}}}}}))
                .message.find("learned.a.per: 'block' is not one of sublayer, layer"),
            std::string::npos);
}

TEST(Formula, RefusesMalformedDocuments) {
  EXPECT_NE(refused({{"sublayer", "x + branch(norm(x))"}}).message.find("a formula needs a \"name\""),
            std::string::npos);
  EXPECT_NE(refused(with(kPre, {{"name", "pre"}})).message.find("name 'pre' is a built-in placement's"),
            std::string::npos);
  EXPECT_NE(refused(with(kPre, {{"name", "a/b"}})).message.find("must start with a letter"), std::string::npos);
  EXPECT_NE(refused(with(kPre, {{"sublayr", "x"}})).message.find("test: unknown key 'sublayr' (known keys: name,"),
            std::string::npos);
  EXPECT_NE(refused({{"name", "f"}, {"attn", "x + branch(norm(x))"}}).message.find("or both \"attn\" and \"ffn\""),
            std::string::npos);
  EXPECT_NE(refused(with(kPre, {{"final_norm", "yes"}})).message.find("final_norm: expected true or false"),
            std::string::npos);
  EXPECT_NE(refused(with(kPre, {{"norms", {{"in_norm", "batchnorm"}}}})).message.find("unknown norm type 'batchnorm'"),
            std::string::npos);
  // Issue 47.8: crmsnorm is refused for what it needs, and not offered in the list of the types a site takes.
  const Refusal crms = refused(with(kPre, {{"norms", {{"in_norm", "crmsnorm"}}}}));
  EXPECT_NE(crms.message.find("norms.in_norm: crmsnorm needs the compressed stream of placement pre_crms"),
            std::string::npos)
      << crms.message;
  EXPECT_EQ(crms.message.find("crmsnorm", crms.message.find("give one of")), std::string::npos) << crms.message;
  const Refusal unknown = refused(with(kPre, {{"norms", {{"in_norm", "batchnorm"}}}}));
  EXPECT_NE(unknown.message.find("rmsnorm"), std::string::npos) << unknown.message;
  EXPECT_EQ(unknown.message.find("crmsnorm"), std::string::npos) << unknown.message;
  EXPECT_NE(refused(with(kPre, {{"norms", {{"out_norm", "rmsnorm"}}}}))
                .message.find("norms.out_norm: no norm(...) of the formula has this site (its sites: in_norm)"),
            std::string::npos);
  EXPECT_NE(refused(with(kPre, {{"defaults", {{"d_modl", 8}}}})).message.find("test: defaults: unknown key 'd_modl'"),
            std::string::npos);
  // A branch's inner site that its own formula's branch does not have.
  const Refusal mid = refused({{"name", "f"}, {"attn", "x + branch(norm(x), mid_norm)"}, {"ffn", "x + branch(x)"}});
  EXPECT_EQ(mid.field, "attn");
  EXPECT_EQ(mid.column, 21);
  EXPECT_NE(mid.message.find("mid_norm is the FFN's"), std::string::npos) << mid.message;
  // A file: missing, or not JSON (with the parser's position).
  EXPECT_NE(refusal([] {
              Formula::read(Json("@/nonexistent/f.json"), "model.placement");
            }).message.find("formula file /nonexistent/f.json does not exist"),
            std::string::npos);
  const fs::path bad = fs::temp_directory_path() / "normlab_formula_test_bad.json";
  std::ofstream(bad) << "{\"name\": \"f\",\n \"sublayer\": }";
  const std::string message = refusal([&] { Formula::read(Json(fmt::format("@{}", bad.string())), "x"); }).message;
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
  EXPECT_NE(message.find("line 2"), std::string::npos) << message;
  fs::remove(bad);
}

TEST(Formula, RefusesWhatOnlyTheModelShowsAtBuildTime) {
  const auto build = [](const Json& f, const Json& extra = Json::object()) {
    return refusal([&] { build_model(config_of(f, extra), 1, 2, engine::DType::f64); });
  };
  const Refusal twice = build(with(kPre, {{"sublayer", "branch(x) + branch(norm(x))"}}));
  EXPECT_EQ(twice.field, "sublayer");
  EXPECT_EQ(twice.column, 13);
  EXPECT_NE(twice.message.find("calls branch(...) a second time; a sub-layer calls it once"), std::string::npos)
      << twice.message;
  const Refusal never = build(with(kPre, {{"sublayer", "l > 1 ? x + branch(x) : norm(x)"}}));
  EXPECT_NE(never.message.find("the attn sub-layer of layer 1 calls branch(...) 0 times"), std::string::npos)
      << never.message;
  const Refusal site = build(with(kPre, {{"sublayer", "norm(x) + branch(norm(x))"}}));
  EXPECT_EQ(site.column, 18);
  EXPECT_NE(site.message.find("norm site 'in_norm' is built twice in one sub-layer"), std::string::npos)
      << site.message;
  const Refusal infinite = build(with(kPre, {{"sublayer", "x + branch(norm(x))/ln(l - 1)"}}));
  EXPECT_NE(infinite.message.find("ln(l - 1) is -inf at L = 2, l = 1"), std::string::npos) << infinite.message;
  // Per-stack constants and the cross-attention's equation are checked against the model's shape.
  const Json per_stack = with(kPre, {{"sublayer", "x + a*branch(norm(x))"}, {"let", {{"a", {{"single", "1"}}}}}});
  EXPECT_NO_THROW(config_of(per_stack));
  EXPECT_NE(refusal([&] {
              config_of(per_stack, {{"shape", "encoder_decoder"}});
            }).message.find("let.a has no \"encoder\" value, which a model of shape encoder_decoder needs"),
            std::string::npos);
  const Json no_cross = {{"name", "f"}, {"attn", "x + branch(norm(x))"}, {"ffn", "x + branch(norm(x))"}};
  EXPECT_NE(refusal([&] {
              config_of(no_cross, {{"shape", "encoder_decoder"}});
            }).message.find("no equation for cross-attention"),
            std::string::npos);
}

TEST(Formula, NamesEachNormSiteFromWhereItStands) {
  const auto described = [](const std::string& sublayer) {
    return read({{"name", "f"}, {"sublayer", sublayer}})->describe().front();
  };
  EXPECT_EQ(described("norm(x + branch(x))"), "attn, cross, ffn:  x' = norm(x + branch(x), post_norm)");
  EXPECT_EQ(described("x + norm(branch(norm(x)))"),
            "attn, cross, ffn:  x' = x + norm(branch(norm(x, in_norm)), out_norm)");
  EXPECT_EQ(described("x + branch(norm(x)/sqrt(l))"), "attn, cross, ffn:  x' = x + branch(norm(x, in_norm)/sqrt(l))");
  EXPECT_EQ(described("x + norm(2*branch(norm(x, in_norm)), post_norm)"),
            "attn, cross, ffn:  x' = x + norm(2*branch(norm(x, in_norm)), post_norm)");
  // Through a let, and in each branch's own formula.
  const auto f = read({{"name", "f"},
                       {"attn", "u + branch(u)"},
                       {"cross", "x + branch(x)"},
                       {"ffn", "x + norm(branch(x))"},
                       {"let", {{"u", "norm(x)"}}}});
  const std::vector<std::string> lines = f->describe();
  EXPECT_EQ(lines[0], "attn:              x' = u + branch(u)");
  EXPECT_EQ(lines[3], "let u = norm(x, in_norm)");
  EXPECT_NE(std::find(lines.begin(), lines.end(), "norm site out_norm: model.norm.type"), lines.end());
}

TEST(Formula, BuildsTheSitesAndLearnedCoefficientsItNames) {
  const Json f = {
      {"name", "f"},
      {"sublayer", "norm(omega*x + branch(x), post_norm) + g*x"},
      {"learned", {{"omega", {{"init", "l/10"}, {"shape", "vector"}}}, {"g", {{"init", "0.5"}, {"per", "layer"}}}}},
      {"norms", {{"post_norm", "rmsnorm"}}}};
  auto m = build_model(config_of(f), 1, 2, engine::DType::f64);
  const engine::Graph& g = m->graph;
  EXPECT_EQ(g.spec(g.at("layers.1.ffn.omega")).shape.numel(), 8);
  EXPECT_EQ(g.spec(g.at("layers.1.ffn.omega")).init_value, 0.2);  // ℓ = 2
  EXPECT_EQ(g.spec(g.at("layers.0.g")).init_value, 0.5);          // one per layer, shared by its sub-layers
  EXPECT_EQ(g.find("layers.0.attn.g"), engine::kNoTensor);
  EXPECT_NE(g.find("layers.0.attn.post_norm.weight"), engine::kNoTensor);
  EXPECT_EQ(g.find("layers.0.attn.post_norm.bias"), engine::kNoTensor);  // rmsnorm has none
  EXPECT_NE(g.find("final_norm.weight"), engine::kNoTensor);
}

TEST(Formula, ReadsFromAFileAndRecordsItsObject) {
  const fs::path file = fs::temp_directory_path() / "normlab_formula_test_deepnorm.json";
  const Json doc = {{"name", "my-deepnorm"},
                    {"sublayer", "norm(alpha*x + branch(x))"},
                    {"let", {{"alpha", "(2*L)^0.25"}}},
                    {"final_norm", false},
                    {"init", {{{"roles", {"v", "o", "fc1", "fc2"}}, {"xavier_gain", "(8*L)^-0.25"}}}}};
  std::ofstream(file) << doc.dump(2);
  Json section = gradient_check_section();
  section["placement"] = fmt::format("@{}", file.string());
  const ModelConfig c = read_model_config(section, "model");
  fs::remove(file);
  EXPECT_EQ(c.placement, "my-deepnorm");
  EXPECT_FALSE(c.has_final_norm());
  const Json recorded = to_json(c);
  EXPECT_EQ(recorded["placement"], doc);
  // What a run recorded reads back as the same config, without the file.
  EXPECT_EQ(to_json(read_model_config(recorded, "config.json: model")), recorded);
  EXPECT_EQ(placement_of(c).name, "my-deepnorm");
  EXPECT_NE(placement_of(c).equations.find("alpha = (2*L)^0.25"), std::string::npos);
  EXPECT_NE(placement_of(c).init_rule.find("v, o, fc1, fc2: Xavier-normal, gain (8*L)^(-0.25)"), std::string::npos);
  // A bare expression is a formula named "formula".
  section["placement"] = "x + branch(norm(x))";
  EXPECT_EQ(read_model_config(section, "model").placement, "formula");
  EXPECT_TRUE(is_formula(Json("@f.json")));
  EXPECT_TRUE(is_formula(Json::object()));
  EXPECT_FALSE(is_formula(Json("deepnorm")));
}

TEST(Formula, ReadsItsShapeForGrouping) {
  EXPECT_TRUE(read(with(kPre, {{"sublayer", "norm(x + branch(x))"}}))->normalizes_stream());
  EXPECT_TRUE(
      read(with(kPre, {{"sublayer", "l < 2 ? norm(x + branch(x)) : x + branch(norm(x))"}}))->normalizes_stream());
  EXPECT_FALSE(read(kPre)->normalizes_stream());
  EXPECT_FALSE(read(kPre)->norm_free());
  EXPECT_TRUE(read(with(kPre, {{"sublayer", "x + branch(x)"}}))->norm_free());
}

TEST(Formula, EveryExampleReadsAndPassesTheGradientCheck) {
  for (const auto& entry : fs::directory_iterator(fs::path(NORMLAB_SOURCE_DIR) / "examples/placements")) {
    SCOPED_TRACE(entry.path().string());
    const auto f = Formula::read(Json(fmt::format("@{}", entry.path().string())), "example");
    for (const char* shape : {"decoder", "encoder", "encoder_decoder"}) {
      SCOPED_TRACE(shape);
      auto m = gradient_check_model(config_of(f->json(), {{"shape", shape}}));
      for (const GradientComparison& c : compare_gradients(*m, {}, 12))
        EXPECT_TRUE(c.zero() || c.agrees()) << c.name << ": relative error " << c.relative();
    }
  }
}

}  // namespace
}  // namespace normlab::model
