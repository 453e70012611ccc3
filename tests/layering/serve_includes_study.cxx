// Must NOT compile: the live view reads what runs write (train/records.h, train/outcome.h), not the studies' code.
#include "study/kit.h"
