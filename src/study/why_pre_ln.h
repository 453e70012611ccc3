#pragma once
#include "study/studies.h"

namespace normlab::study {
extern const Study kWhyPreLn;
}
