/* The one SimGrid call the simulator needs that has no C binding in SimGrid 3.32. */
#ifndef RF_SIM_COMM_RATE_H
#define RF_SIM_COMM_RATE_H

#include <simgrid/forward.h>

#ifdef __cplusplus
extern "C" {
#endif
/* sg_mailbox_put_async with a rate bound in bytes/s (<= 0: none); same reference counting. */
sg_comm_t rf_sim_put_async_rate(sg_mailbox_t mailbox, void *payload, long bytes, double rate_Bps);
#ifdef __cplusplus
}
#endif

#endif
