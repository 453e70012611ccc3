#pragma once
// On-demand analyses of a model (a checkpoint, or a config freshly initialized), each from the
// paper that argues with it. `normlab probe` runs them and writes analysis.jsonl / analysis.csv.
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/config_reader.h"
#include "io/corpus.h"
#include "model/transformer.h"
#include "train/loader.h"
#include "train/memory.h"
#include "train/train_config.h"

namespace normlab::analysis {

struct AnalysisSettings {
  int batches = 4;   // batches averaged per measurement
  int seeds = 3;     // initializations averaged (gradient norms at init)
  double lr = 1e-3;  // the one optimizer step of the output-change analysis
  int span = 1;      // n in the angular distance between layer ℓ and ℓ + n
  // Told after each step of an analysis (a batch, a layer dropped): `done` of `total`, for a progress line.
  std::function<void(int done, int total)> progress;
  // A token id's text, where the run has a tokenizer (massive-activations names the token holding the largest value).
  std::function<std::string(int32_t id)> token_text;
  // √C of branch-noise: the std of the noise added to each entry of each residual branch's output. Small enough that
  // the output change stays linear in it (at 1e-2 the deepest Post-LN output moves by a few percent of its scale).
  double branch_noise = 1e-2;
};

// The seed of the k-th fresh initialization that the init-time analyses average for run seed `seed`:
// both mixed through splitmix64, so the inits of different run seeds are independent draws (seed + k
// would let run seeds 1, 2, 3 share inits).
uint64_t fresh_init_seed(uint64_t seed, int k);

// Xiong et al. 2020, Fig. 3: ‖∂L/∂W‖ of every parameter at initialization, averaged over seeds × batches.
Json gradient_norms_at_init(const train::RunConfig& config, const train::Loader& loader, const AnalysisSettings& s);
// Xiong et al. 2020, Lemma 2: E‖x_l‖²/d of the stream entering each layer at init, mean over seeds × batches.
Json stream_at_init(const train::RunConfig& config, const train::Loader& loader, const AnalysisSettings& s);
// Liu et al. 2020 (Admin): the output change after one AdamW step from W to W* (a fresh optimizer, lr
// s.lr, on training batch 0), by two definitions:
//   output_change_rms: √mean (z(x, W*) − z(x, W))² over the logits z of the update batch itself (every
//     parameter moved, head and final norm included);
//   stack_change_ms: Admin's own, |F(x, W*) − F(x, W)|² with F the layer stack's output (the stream
//     leaving the last layer, before any final norm and the head), measured on another batch x (validation
//     batch 0), as the mean square per entry.
Json one_step_output_change(model::Model& m, const train::Loader& loader, const train::RunConfig& config,
                            const AnalysisSettings& s);
// Liu et al. 2020 (Admin), Theorem 2's perturbation: every residual branch's output f_i gets its own independent
// N(0, C) noise on every entry (C = s.branch_noise²), and Var[ΔF] is the mean square change of F, the stack's
// normalized output that the head reads (the final norm's output, or the last sub-layer's norm in Post-LN), over
// s.batches draws, draw b on validation batch b. Unlike one step of Adam, which moves every branch the same way
// (so the changes add up ∝ N²), independent changes add up as the theorem's Σ_i β²_{N,i}·C.
Json branch_noise_output_change(model::Model& m, const train::Loader& loader, const train::RunConfig& config,
                                const AnalysisSettings& s);
// Gromov et al. / Curse of Depth: arccos(cos(x_ℓ, x_{ℓ+n}))/π averaged over tokens, per layer pair.
Json angular_distances(model::Model& m, const train::Loader& loader, const AnalysisSettings& s);
// Mix-LN / Curse of Depth: validation loss with layer ℓ skipped, minus the full model's.
Json layer_drop(model::Model& m, const train::Loader& loader, const AnalysisSettings& s);
// Jiang et al. 2023: a Pre-LN model (bias-free LayerNorm) against the Pre-RMSNorm model with the same
// weights and the Pre-CRMSNorm model converted from it; logits, loss and (Pre-RMS) gradients, fp32 and fp64.
Json norm_equivalence(const model::Model& pre_ln, const train::Loader& loader);
// Entropy of each head's attention distribution, averaged over queries and batches (nats).
Json attention_entropy(model::Model& m, const train::Loader& loader, const AnalysisSettings& s);

// Sun et al. 2024, Massive Activations: per stream (entering each layer, then the stack's output), the largest |x| over
// the batches' tokens and features, where it sits (batch, row, position, feature, token id and, with s.token_text, the
// token), the stream's RMS and the mean over batches of the median |x|, for scale.
Json massive_activations(model::Model& m, const train::Loader& loader, const AnalysisSettings& s);
// The logit lens (nostalgebraist 2020): each stream (entering each layer, then the stack's output) through the model's
// own final norm and head (model::build_readout_model): its loss against the targets, the share of positions whose
// top-1 token is the target and the share where it is the full model's top-1. The last stream's loss is the model's.
Json logit_lens(model::Model& m, const train::Loader& loader, const AnalysisSettings& s);

// ---- The table of analyses: `normlab probe --analysis` and its messages list from it
// ----------------------------------

// What an analysis reads: the model (a checkpoint, or a config freshly initialized), the run's batches and config.
struct AnalysisInput {
  model::Model& model;
  const train::Loader& loader;
  const train::RunConfig& config;
  const AnalysisSettings& settings;
};

struct Analysis {
  std::string_view name;
  std::string_view about;    // what it measures and the paper it comes from, for `normlab probe --help`
  std::string_view columns;  // the result's columns, as records.h spells them
  Json (*run)(const AnalysisInput& input);
  // Models it holds beside the one it reads at once, for the memory check: trainable ones (with gradients),
  // inference-only ones, each counted in copies of the run's model, and inference-only ones that read the run's
  // weights in place (their activations alone).
  struct ExtraModels {
    int trainable = 0, inference = 0, sharing = 0;
  } extra_models = {};
  bool optimizer = false;       // it takes an optimizer step (AdamW's moments)
  bool moves_weights = false;   // it changes the model's weights: the caller restores them after it
  std::string_view alias = {};  // another name --analysis accepts for it (records keep `name`)
};

std::span<const Analysis> all_analyses();
// The table as `normlab probe --help` shows it: each name with what it measures and its columns.
std::string analyses_help();
// The analyses of a comma-separated list, in its order; fails on a name the table lacks, listing the table.
std::vector<const Analysis*> parse_analyses(std::string_view list);
// What the analyses of `list` hold beside the model they read, for the memory check: the most models any one
// holds at once, and whether one takes an optimizer step.
train::MemoryNeeds memory_needs(std::string_view list);

}  // namespace normlab::analysis
