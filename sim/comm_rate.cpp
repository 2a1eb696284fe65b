// SimGrid 3.32 has no C binding for a communication's rate bound (s4u::Comm::set_rate); this is
// the one C++ shim the simulator needs. Same reference counting as sg_mailbox_put_async.
#include "comm_rate.h"

#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Mailbox.hpp>

sg_comm_t rf_sim_put_async_rate(sg_mailbox_t mailbox, void *payload, long bytes, double rate_Bps) {
  simgrid::s4u::CommPtr comm = mailbox->put_init(payload, bytes);
  if (rate_Bps > 0) comm->set_rate(rate_Bps);
  comm->start();
  comm->add_ref();
  return comm.get();
}
