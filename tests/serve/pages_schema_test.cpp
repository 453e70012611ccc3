// The live view's JavaScript reads records by the names the C++ writers use: every F.<name> (metrics.jsonl, the
// index's run entries) and P.<name> (probes.jsonl) in the pages is a key of the schema the server emits, so a field
// renamed in train/records.h or probe/records.h breaks this test instead of emptying a chart.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "probe/records.h"
#include "serve/pages.h"
#include "train/records.h"

namespace normlab::serve {
namespace {

// Every "X.a" or "X.group.b" the pages' scripts read, as "a" or "group.b".
std::set<std::string> names_read(const std::string& page, char object) {
  std::set<std::string> names;
  const std::regex use(std::string("\\b") + object + "\\.([a-z_]+)(\\.([a-z_]+))?");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), use); it != std::sregex_iterator(); ++it)
    names.insert((*it)[2].matched ? (*it)[1].str() + "." + (*it)[3].str() : (*it)[1].str());
  return names;
}

bool in_schema(const Json& schema, const std::string& name) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos) return schema.contains(name) && schema[name].is_string();
  const std::string group = name.substr(0, dot);
  return schema.contains(group) && schema[group].contains(name.substr(dot + 1));
}

TEST(ServePages, EveryFieldThePagesReadIsInTheSchema) {
  const Json fields = train::record_fields(), probes = probe::probe_fields();
  int read = 0;
  for (const std::string& page : {index_page(), run_page(), compare_page()}) {
    EXPECT_NE(page.find("const F = " + fields.dump() + ";"), std::string::npos);
    EXPECT_NE(page.find("const P = " + probes.dump() + ";"), std::string::npos);
    for (const std::string& name : names_read(page, 'F')) {
      EXPECT_TRUE(in_schema(fields, name)) << "F." << name << " is not a field of train/records.h";
      ++read;
    }
    for (const std::string& name : names_read(page, 'P')) {
      EXPECT_TRUE(in_schema(probes, name)) << "P." << name << " is not a field of probe/records.h";
      ++read;
    }
  }
  EXPECT_GT(read, 20);
  // The schema maps C++ names to spellings: here they agree, and the test above holds them to the pages.
  EXPECT_EQ(fields["val_loss"], train::field::val_loss);
  EXPECT_EQ(probes["families"]["stream"], probe::family::stream);
}

TEST(ServePages, NamesNotInTheSchemaAreCaught) {
  const std::string page = "<script>r[F.val_loss]; r[F.validation_loss]; r[F.types.train]; r[F.types.bogus];</script>";
  const std::set<std::string> names = names_read(page, 'F');
  EXPECT_EQ(names, (std::set<std::string>{"val_loss", "validation_loss", "types.train", "types.bogus"}));
  const Json fields = train::record_fields();
  EXPECT_TRUE(in_schema(fields, "val_loss"));
  EXPECT_FALSE(in_schema(fields, "validation_loss"));
  EXPECT_TRUE(in_schema(fields, "types.train"));
  EXPECT_FALSE(in_schema(fields, "types.bogus"));
}

}  // namespace
}  // namespace normlab::serve
