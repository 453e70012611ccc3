// Must NOT compile: a study runs its analyses as `normlab probe` processes and reads their files; it links no
// analysis code.
#include "analysis/analyses.h"
