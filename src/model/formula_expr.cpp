#include "model/formula_expr.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace normlab::model::formula {

namespace {

std::string message_at(const Source& source, size_t offset, const std::string& message) {
  const std::string rest = offset < source.text.size() ? source.text.substr(offset) : std::string();
  return fmt::format("{}: {} \"{}\", column {} ({}): {}", source.where, source.field, printable(source.text, 200),
                     offset + 1, rest.empty() ? std::string("at its end") : "at \"" + printable(rest, 40) + "\"",
                     message);
}

bool identifier_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

struct Token {
  enum class Kind { number, name, symbol, end } kind;
  std::string text;
  size_t at;
  double value = 0;
};

class Parser {
 public:
  explicit Parser(const Source& source) : source_(source) { advance(); }

  Expr whole() {
    Expr e = expression();
    if (token_.kind != Token::Kind::end) error(fmt::format("unexpected '{}' after a complete expression", token_.text));
    return e;
  }

 private:
  [[noreturn]] void error(const std::string& message) const { throw FormulaError(source_, token_.at, message); }
  [[noreturn]] static void too_deep(const Source& source, size_t at) {
    throw FormulaError(source, at,
                       fmt::format("the expression nests deeper than {} levels (parentheses, calls, minuses, powers or "
                                   "a chain of operators): split it into lets",
                                   kMaxNesting));
  }

  // Every recursion of the grammar passes through expression() (parentheses, a call's arguments, the arms of
  // c ? a : b) or through unary() after '-' or '^': counting those open calls bounds the recursion before any node
  // exists to measure.
  class Nested {
   public:
    explicit Nested(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) too_deep(p_.source_, p_.token_.at);
    }
    ~Nested() { --p_.depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

   private:
    Parser& p_;
  };

  void advance() {
    const std::string& t = source_.text;
    while (pos_ < t.size() && std::isspace(static_cast<unsigned char>(t[pos_]))) ++pos_;
    token_ = {Token::Kind::end, "", pos_};
    if (pos_ >= t.size()) return;
    const char c = t[pos_];
    const auto digit = [&](size_t i) { return i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); };
    if (digit(pos_) || (c == '.' && digit(pos_ + 1))) {
      // digits [. digits] [e [+-] digits], read by hand so that strtod's hexadecimal and inf forms stay out
      size_t end = pos_;
      while (digit(end)) ++end;
      if (end < t.size() && t[end] == '.') ++end;
      while (digit(end)) ++end;
      if (end < t.size() && (t[end] == 'e' || t[end] == 'E')) {
        size_t exponent = end + 1;
        if (exponent < t.size() && (t[exponent] == '+' || t[exponent] == '-')) ++exponent;
        if (digit(exponent)) {
          end = exponent;
          while (digit(end)) ++end;
        }
      }
      token_.kind = Token::Kind::number;
      token_.text = t.substr(pos_, end - pos_);
      token_.value = std::strtod(token_.text.c_str(), nullptr);
      pos_ = end;
      if (pos_ < t.size() && identifier_char(t[pos_]))
        throw FormulaError(source_, token_.at,
                           fmt::format("'{}' is not a number: write {}*{} (multiplication is written out)",
                                       token_.text + t[pos_], token_.text, t[pos_]));
      return;
    }
    if (identifier_start(c)) {
      const size_t begin = pos_;
      while (pos_ < t.size() && identifier_char(t[pos_])) ++pos_;
      token_.kind = Token::Kind::name;
      token_.text = t.substr(begin, pos_ - begin);
      return;
    }
    for (const char* two : {"<=", ">=", "==", "!="})
      if (t.compare(pos_, 2, two) == 0) {
        token_ = {Token::Kind::symbol, two, pos_};
        pos_ += 2;
        return;
      }
    if (std::string_view("+-*/^(),?:<>").find(c) == std::string_view::npos)
      throw FormulaError(source_, pos_,
                         fmt::format("unexpected character '{}' (the formula language has numbers, names, "
                                     "+ - * / ^, comparisons, c ? a : b and calls f(a, b))",
                                     printable(std::string(1, c))));
    token_ = {Token::Kind::symbol, std::string(1, c), pos_};
    ++pos_;
  }

  bool at_symbol(std::string_view s) const { return token_.kind == Token::Kind::symbol && token_.text == s; }

  void expect(std::string_view s, std::string_view what) {
    if (!at_symbol(s))
      error(fmt::format("expected '{}' {}, found {}", s, what,
                        token_.kind == Token::Kind::end ? std::string("the end") : "'" + token_.text + "'"));
    advance();
  }

  // A node above its arguments; a left-associative chain deepens the tree without recursion, so its height is
  // checked here.
  Expr node(Expr::Kind kind, size_t at, std::string name, std::vector<Expr> args) const {
    Expr e;
    e.kind = kind, e.at = at, e.name = std::move(name), e.args = std::move(args);
    for (const Expr& a : e.args) e.height = std::max(e.height, a.height + 1);
    if (e.height > kMaxNesting) too_deep(source_, at);
    return e;
  }

  // expression := comparison ('?' expression ':' expression)?
  Expr expression() {
    const Nested nested(*this);
    Expr condition = comparison();
    if (!at_symbol("?")) return condition;
    const size_t at = token_.at;
    advance();
    Expr yes = expression();
    expect(":", "between the two arms of c ? a : b");
    Expr no = expression();
    return node(Expr::Kind::ternary, at, "?", {std::move(condition), std::move(yes), std::move(no)});
  }

  // comparison := sum (('<' | '<=' | '>' | '>=' | '==' | '!=') sum)?
  Expr comparison() {
    Expr left = sum();
    for (const char* op : {"<", "<=", ">", ">=", "==", "!="})
      if (at_symbol(op)) {
        const size_t at = token_.at;
        advance();
        return node(Expr::Kind::binary, at, op, {std::move(left), sum()});
      }
    return left;
  }

  // sum := product (('+' | '-') product)*;  product := unary (('*' | '/') unary)*   (both left-associative)
  Expr sum() { return chain("+", "-", &Parser::product); }
  Expr product() { return chain("*", "/", &Parser::unary); }

  Expr chain(std::string_view op1, std::string_view op2, Expr (Parser::*operand)()) {
    Expr e = (this->*operand)();
    while (at_symbol(op1) || at_symbol(op2)) {
      const std::string op = token_.text;
      const size_t at = token_.at;
      advance();
      e = node(Expr::Kind::binary, at, op, {std::move(e), (this->*operand)()});
    }
    return e;
  }

  // unary := '-' unary | power;  power := primary ('^' unary)?   (so -2^2 = -(2^2) and 2^-0.25 reads)
  Expr unary() {
    if (at_symbol("-")) {
      const Nested nested(*this);
      const size_t at = token_.at;
      advance();
      return node(Expr::Kind::negate, at, "-", {unary()});
    }
    Expr base = primary();
    if (!at_symbol("^")) return base;
    const Nested nested(*this);
    const size_t at = token_.at;
    advance();
    return node(Expr::Kind::binary, at, "^", {std::move(base), unary()});
  }

  // primary := number | name | name '(' expression (',' expression)* ')' | '(' expression ')'
  Expr primary() {
    if (token_.kind == Token::Kind::number) {
      Expr e = node(Expr::Kind::number, token_.at, token_.text, {});
      e.value = token_.value;
      advance();
      return e;
    }
    if (token_.kind == Token::Kind::name) {
      Expr e = node(Expr::Kind::name, token_.at, token_.text, {});
      advance();
      if (!at_symbol("(")) return e;
      advance();
      e.kind = Expr::Kind::call;
      if (at_symbol(")")) error(fmt::format("{}() needs an argument", e.name));
      e.args.push_back(expression());
      while (at_symbol(",")) {
        advance();
        e.args.push_back(expression());
      }
      expect(")", fmt::format("to close {}(", e.name));
      return node(Expr::Kind::call, e.at, std::move(e.name), std::move(e.args));
    }
    if (at_symbol("(")) {
      advance();
      Expr e = expression();
      expect(")", "to close '('");
      return e;
    }
    error(token_.kind == Token::Kind::end ? std::string("the expression ends where a value is expected")
                                          : fmt::format("expected a number, a name or '(', found '{}'", token_.text));
  }

  const Source& source_;
  size_t pos_ = 0;
  Token token_;
  int depth_ = 0;  // expression() and unary() calls open
};

bool needs_parentheses(const Expr& operand) {
  return operand.kind == Expr::Kind::binary || operand.kind == Expr::Kind::ternary ||
         operand.kind == Expr::Kind::negate;
}

std::string operand(const Expr& e, const std::map<const Expr*, std::string>& sites) {
  return needs_parentheses(e) ? fmt::format("({})", print(e, sites)) : print(e, sites);
}

}  // namespace

FormulaError::FormulaError(const Source& source, size_t offset, const std::string& message)
    : Error(message_at(source, offset, message)), field(source.field), text(source.text), column(offset + 1) {}

Parsed parse(Source source) {
  if (source.text.find_first_not_of(" \t\r\n") == std::string::npos) throw FormulaError(source, 0, "empty expression");
  Parsed p{std::move(source), {}};
  p.root = Parser(p.source).whole();
  return p;
}

std::string print(const Expr& e, const std::map<const Expr*, std::string>& sites) {
  switch (e.kind) {
    case Expr::Kind::number:
    case Expr::Kind::name:
      return e.name;
    case Expr::Kind::negate:
      return fmt::format("-{}", operand(e.args[0], sites));
    case Expr::Kind::binary: {
      const bool tight = e.name == "*" || e.name == "/" || e.name == "^";
      return operand(e.args[0], sites) + (tight ? e.name : " " + e.name + " ") + operand(e.args[1], sites);
    }
    case Expr::Kind::ternary:
      return operand(e.args[0], sites) + " ? " + operand(e.args[1], sites) + " : " + operand(e.args[2], sites);
    case Expr::Kind::call: {
      std::string out = e.name + "(";
      for (size_t i = 0; i < e.args.size(); ++i) out += (i ? ", " : "") + print(e.args[i], sites);
      const auto site = e.args.size() == 1 ? sites.find(&e) : sites.end();
      return out + (site != sites.end() ? ", " + site->second : "") + ")";
    }
  }
  return "";
}

bool is_identifier(const std::string& text) {
  if (text.empty() || !identifier_start(text[0])) return false;
  for (char c : text)
    if (!identifier_char(c)) return false;
  return true;
}

}  // namespace normlab::model::formula
