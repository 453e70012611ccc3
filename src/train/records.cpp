#include "train/records.h"

#include <fmt/core.h>

#include <fstream>

#include "io/atomic_file.h"

namespace normlab::train {

namespace {

// A field's value when it is there; a present field of the wrong type is a RecordError naming it.
double number(const Json& j, const char* key, double fallback = NAN) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_number()) throw RecordError{fmt::format("{} is not a number", key)};
  return it->get<double>();
}

int integer(const Json& j, const char* key, int fallback = 0) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_number_integer()) throw RecordError{fmt::format("{} is not an integer", key)};
  return it->get<int>();
}

std::string text(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return "";
  if (!it->is_string()) throw RecordError{fmt::format("{} is not a string", key)};
  return it->get<std::string>();
}

void require_object(const Json& j) {
  if (!j.is_object()) throw RecordError{"not a JSON object"};
}

}  // namespace

Json TrainRecord::to_json() const {
  return {{field::type, record_type::train},
          {field::step, step},
          {field::loss, loss},
          {field::lr, lr},
          {field::grad_norm, grad_norm},
          {field::tokens_per_s, tokens_per_s},
          {field::elapsed_s, elapsed_s}};
}

TrainRecord TrainRecord::from_json(const Json& j) {
  require_object(j);
  return {.step = integer(j, field::step),
          .loss = number(j, field::loss),
          .lr = number(j, field::lr),
          .grad_norm = number(j, field::grad_norm),
          .tokens_per_s = number(j, field::tokens_per_s),
          .elapsed_s = number(j, field::elapsed_s)};
}

Json EvalRecord::to_json() const {
  return {{field::type, record_type::eval},
          {field::step, step},
          {field::val_loss, val_loss},
          {field::val_accuracy, val_accuracy}};
}

EvalRecord EvalRecord::from_json(const Json& j) {
  require_object(j);
  return {.step = integer(j, field::step),
          .val_loss = number(j, field::val_loss),
          .val_accuracy = number(j, field::val_accuracy)};
}

Json SpikeRecord::to_json() const {
  return {{field::type, record_type::spike},
          {field::step, step},
          {field::loss, loss},
          {field::loss_z, loss_z},
          {field::grad_norm, grad_norm},
          {field::grad_norm_z, grad_norm_z},
          {field::update_skipped, update_skipped}};
}

Json NonFiniteRecord::to_json() const {
  Json j{{field::type, record_type::non_finite},
         {field::step, step},
         {field::first, first},
         {field::unigram_entropy_nats, unigram_entropy_nats}};
  for (const auto& [key, value] : values) j[key] = value;
  return j;
}

NonFiniteRecord NonFiniteRecord::from_json(const Json& j) {
  require_object(j);
  return {.step = integer(j, field::step),
          .first = text(j, field::first),
          .unigram_entropy_nats = number(j, field::unigram_entropy_nats),
          .values = {}};
}

std::string record_type_of(const Json& j) { return j.is_object() ? text(j, field::type) : ""; }

Json RunSummary::to_json() const {
  Json s{{field::steps, steps},
         {field::train_loss, train_loss},
         {field::val_loss, val_loss},
         {field::val_accuracy, val_accuracy},
         {field::unigram_entropy_nats, unigram_entropy_nats},
         {field::seconds, seconds},
         {field::tokens_per_s, tokens_per_s},
         {field::parameters, parameters},
         {field::precision, precision}};
  if (std::isfinite(bleu)) {
    s[field::bleu] = bleu, s[field::chrf] = chrf, s[field::bleu_pairs] = bleu_pairs;
    s[field::bleu_decoding] = "greedy";
  }
  return s;
}

RunSummary RunSummary::from_json(const Json& j) {
  require_object(j);
  RunSummary s;
  s.steps = integer(j, field::steps);
  s.train_loss = number(j, field::train_loss);
  s.val_loss = number(j, field::val_loss);
  s.val_accuracy = number(j, field::val_accuracy);
  s.unigram_entropy_nats = number(j, field::unigram_entropy_nats);
  s.seconds = number(j, field::seconds);
  s.tokens_per_s = number(j, field::tokens_per_s);
  s.parameters = static_cast<int64_t>(number(j, field::parameters, 0));
  s.precision = text(j, field::precision);
  s.bleu = number(j, field::bleu);
  s.chrf = number(j, field::chrf);
  s.bleu_pairs = integer(j, field::bleu_pairs);
  return s;
}

namespace {

// Each metrics.jsonl line of `type` that `take` accepts (a malformed one is skipped).
template <typename F>
void each_record(const std::filesystem::path& run_dir, const char* type, F take) {
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const Json j = parse_json_or_discarded(line);
    try {
      if (record_type_of(j) == type) take(j);
    } catch (const RecordError&) {
    }
  }
}

}  // namespace

std::optional<RunSummary> read_run_summary(const std::filesystem::path& run_dir) {
  const std::filesystem::path file = run_dir / "summary.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return std::nullopt;
  try {
    return RunSummary::from_json(parse_json_or_discarded(io::read_file(file)));
  } catch (const RecordError&) {
    return std::nullopt;
  }
}

std::vector<TrainRecord> read_train_records(const std::filesystem::path& run_dir) {
  std::vector<TrainRecord> records;
  each_record(run_dir, record_type::train, [&](const Json& j) { records.push_back(TrainRecord::from_json(j)); });
  return records;
}

std::optional<NonFiniteRecord> read_non_finite(const std::filesystem::path& run_dir) {
  std::optional<NonFiniteRecord> record;
  each_record(run_dir, record_type::non_finite, [&](const Json& j) { record = NonFiniteRecord::from_json(j); });
  return record;
}

Json record_fields() {
  // Keyed by the C++ name, so that the page's F.val_loss follows a change of spelling here, and a renamed
  // constant leaves the page's name unknown (ServePages.EveryFieldThePagesReadIsInTheSchema fails).
#define NORMLAB_FIELD(name) {#name, field::name}
  Json names{NORMLAB_FIELD(type),         NORMLAB_FIELD(step),
             NORMLAB_FIELD(loss),         NORMLAB_FIELD(lr),
             NORMLAB_FIELD(grad_norm),    NORMLAB_FIELD(tokens_per_s),
             NORMLAB_FIELD(elapsed_s),    NORMLAB_FIELD(val_loss),
             NORMLAB_FIELD(val_accuracy), NORMLAB_FIELD(loss_z),
             NORMLAB_FIELD(grad_norm_z),  NORMLAB_FIELD(update_skipped),
             NORMLAB_FIELD(first),        NORMLAB_FIELD(unigram_entropy_nats),
             NORMLAB_FIELD(steps),        NORMLAB_FIELD(train_loss),
             NORMLAB_FIELD(seconds),      NORMLAB_FIELD(parameters),
             NORMLAB_FIELD(precision),    NORMLAB_FIELD(bleu),
             NORMLAB_FIELD(chrf),         NORMLAB_FIELD(bleu_pairs),
             NORMLAB_FIELD(bleu_decoding)};
#undef NORMLAB_FIELD
#define NORMLAB_TYPE(name) {#name, record_type::name}
  names["types"] = {NORMLAB_TYPE(train), NORMLAB_TYPE(eval), NORMLAB_TYPE(spike), NORMLAB_TYPE(non_finite)};
#undef NORMLAB_TYPE
  return names;
}

}  // namespace normlab::train
