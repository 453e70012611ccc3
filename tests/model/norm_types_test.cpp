// The norm-type registry (model/norm.h): every type builds the op it declares with the parameters it
// lists, probes find its node by that op, and config validation and its error come from the same list.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/error.h"
#include "model/config.h"
#include "model/norm.h"

namespace normlab::model {
namespace {

namespace eng = normlab::engine;

TEST(NormTypes, EachTypeRecordsItsOpWithTheParametersItLists) {
  std::set<std::string> names;
  for (const NormType* t : all_norm_types()) {
    SCOPED_TRACE(std::string(t->name));
    EXPECT_TRUE(names.insert(std::string(t->name)).second) << "registered twice";
    EXPECT_FALSE(t->equation.empty());
    ASSERT_NE(t->build, nullptr);
    ModelConfig c;
    c.norm.type = std::string(t->name);
    eng::Graph g;
    const eng::TensorId x = g.input("x", eng::Shape{4, 8}, eng::DType::f32);
    const eng::TensorId y = make_norm(g, c, "n", x);
    if (t->op == eng::OpKind::count) {  // `none` passes its input through and records nothing
      EXPECT_EQ(y, x);
      EXPECT_TRUE(g.nodes().empty());
      EXPECT_EQ(t->inv_sigma, nullptr);
      continue;
    }
    ASSERT_EQ(g.nodes().size(), 1u);
    EXPECT_EQ(g.nodes()[0].op, t->op);
    EXPECT_EQ(g.spec(y).name, "n.out");
    EXPECT_NE(t->inv_sigma, nullptr);
    EXPECT_NE(norm_type_of(t->op), nullptr);
    std::set<std::string> listed, built;
    for (const NormParam& p : t->params) listed.insert("n." + std::string(p.suffix));
    for (eng::TensorId p : g.parameters()) built.insert(g.spec(p).name);
    EXPECT_EQ(built, listed);  // model.norm.bias is on by default, so β is built where listed
  }
  EXPECT_TRUE(names.contains("none"));
}

TEST(NormTypes, OnlyNormOpsMapToANormType) {
  EXPECT_EQ(norm_type_of(eng::OpKind::layer_norm)->name, "layernorm");
  EXPECT_EQ(norm_type_of(eng::OpKind::rms_norm)->name, "rmsnorm");  // the first type recording rms_norm
  EXPECT_EQ(norm_type_of(eng::OpKind::linear), nullptr);
  EXPECT_EQ(norm_type_of(eng::OpKind::count), nullptr);
}

TEST(NormTypes, ConfigRefusesAnUnknownTypeAndListsTheRegistry) {
  try {
    read_model_config(Json::parse(R"({"norm": {"type": "batchnorm"}})"), "config.json: model");
    FAIL() << "an unknown norm type was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("batchnorm"), std::string::npos) << message;
    for (const std::string& name : norm_type_names()) EXPECT_NE(message.find(name), std::string::npos) << message;
  }
  EXPECT_THROW(find_norm_type("batchnorm"), Error);
  EXPECT_EQ(find_norm_type("dyt").op, eng::OpKind::dyt);
}

}  // namespace
}  // namespace normlab::model
