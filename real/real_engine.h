/* Internal to real/: the engine's measurements (RfRealSpread) are public now, in real.h. */
#ifndef RF_REAL_ENGINE_H
#define RF_REAL_ENGINE_H

#include "real.h"

#endif
