// Must compile: the control for the two wrong-way cases (a layer sees the layers it links).
#include "engine/graph.h"
#include "model/config.h"

int layering_control() { return static_cast<int>(sizeof(normlab::engine::Node)); }
