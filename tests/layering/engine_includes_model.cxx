// Must NOT compile: the engine knows nothing of Transformers, so model/ is not on its include path.
#include "model/config.h"
