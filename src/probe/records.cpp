#include "probe/records.h"

namespace normlab::probe {

Json probe_fields() {
  // Keyed by the C++ name, so that the page's P.mean_square follows a change of spelling here, and a renamed
  // constant leaves the page's name unknown (ServePages.EveryFieldThePagesReadIsInTheSchema fails).
#define NORMLAB_FIELD(name) {#name, field::name}
  Json names{NORMLAB_FIELD(step),
             NORMLAB_FIELD(family),
             NORMLAB_FIELD(layer),
             NORMLAB_FIELD(sublayer),
             NORMLAB_FIELD(name),
             NORMLAB_FIELD(mean_square),
             NORMLAB_FIELD(rms),
             NORMLAB_FIELD(max_abs),
             NORMLAB_FIELD(grad_norm),
             NORMLAB_FIELD(inv_sigma),
             NORMLAB_FIELD(input_rms),
             NORMLAB_FIELD(weight_norm),
             NORMLAB_FIELD(update_norm),
             NORMLAB_FIELD(update_ratio),
             NORMLAB_FIELD(value),
             NORMLAB_FIELD(loss),
             NORMLAB_FIELD(logit_change_rms)};
#undef NORMLAB_FIELD
#define NORMLAB_FAMILY(name) {#name, family::name}
  names["families"] = {NORMLAB_FAMILY(stream), NORMLAB_FAMILY(branch),      NORMLAB_FAMILY(norm),
                       NORMLAB_FAMILY(param),  NORMLAB_FAMILY(scalar),      NORMLAB_FAMILY(loss),
                       NORMLAB_FAMILY(update), NORMLAB_FAMILY(model_update)};
#undef NORMLAB_FAMILY
  return names;
}

}  // namespace normlab::probe
