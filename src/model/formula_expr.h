#pragma once
// The expression language of a placement written as a formula (docs/variants.md, "Your own placement: a
// formula"): numbers, names, + − * / ^, comparisons, c ? a : b, and calls f(a, b). A recursive-descent parser;
// every node keeps the offset of its token, so that a mistake found later (an unknown name, a tensor where a
// number belongs) is reported at its column of the field it sits in.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "common/config_reader.h"
#include "common/error.h"

namespace normlab::model::formula {

// One expression's text: where the formula came from (its file, or model.placement), the field inside it
// ("sublayer", "let.alpha", "init[0].xavier_gain") and the text itself.
struct Source {
  std::string where, field, text;
};

// A mistake at one place of a formula. The message is one line: the field, the column (counted from 1), the text
// from there on, and what is wrong.
class FormulaError : public Error {
 public:
  FormulaError(const Source& source, size_t offset, const std::string& message);
  std::string field, text;
  size_t column;  // 1-based
};

struct Expr {
  enum class Kind { number, name, negate, binary, ternary, call };
  Kind kind = Kind::number;
  size_t at = 0;           // the offset of its token in the source text
  double value = 0;        // number
  std::string name;        // name; call: the function; binary: the operator (+ - * / ^ < <= > >= == !=)
  std::vector<Expr> args;  // negate: 1, binary: 2, ternary: condition and the two arms, call: its arguments
  int height = 1;          // the longest path from here to a leaf, counting both ends: at most kMaxNesting
};

// An expression with its source, as a formula holds it.
struct Parsed {
  Source source;
  Expr root;
};

// Parses source.text; throws FormulaError at the first token that does not fit the grammar, and where the
// expression nests deeper than kMaxNesting (common/config_reader.h): through parentheses, calls, unary minuses,
// powers, or a long chain of + - * / (a + b + c is two levels).
Parsed parse(Source source);
// The expression as it was understood: every operand that is itself an operation is parenthesized, and a norm(...)
// call found in `sites` is shown with its site.
std::string print(const Expr& e, const std::map<const Expr*, std::string>& sites = {});
bool is_identifier(const std::string& text);

}  // namespace normlab::model::formula
