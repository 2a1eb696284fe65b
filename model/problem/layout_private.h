/* Internals shared by the layout readers (layout.c, preset.c, spec.c); not a public API. */
#ifndef RF_LAYOUT_PRIVATE_H
#define RF_LAYOUT_PRIVATE_H

#include "layout.h"

/* An empty side of a framework for nparts parts: placements and local maps zeroed, no meshes. */
void rf_side_init(RfSide *s, const char *framework, uint32_t nparts);
/* Free what a side owns and zero it; a zeroed side is a no-op. */
void rf_side_clear(RfSide *s);

#endif
