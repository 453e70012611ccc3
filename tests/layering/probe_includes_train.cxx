// Must NOT compile: the probes' instruments sit below train (the trainer calls them, not the reverse).
#include "train/trainer.h"
