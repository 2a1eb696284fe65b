/* The schedule of a plan: the order in which refit's executor moves a plan's messages, as data.
 * real/ runs it and sim/ simulates it (`refit sim --software refit --software-variant executor`);
 * neither invents an order of its own.
 *
 * Every message is cut into segments of at most the staging bound (pipelined: a quarter of it,
 * RF_SCHEDULE_CUTS, so that a round's room fills up: with whole-bound segments a rank receiving
 * 40 MiB pieces against a 64 MiB bound took one per round and stayed 62% full). Each segment goes
 * first-fit into the earliest round of its stage where both ends still have staging room and
 * operation slots; a round is one group of sends and receives (collective: every rank meets its
 * peers in the same round), and rounds never span stages. A round uses one staging slot of each
 * rank taking part: the lane, (round - first round of its stage) mod slots. With more than one slot
 * a rank keeps up to `slots` rounds in flight:
 *
 *   PACK r    copy the round's send boxes into the lane's send staging (copy stream)
 *   POST r    start its sends and receives (communication stream; after PACK r)
 *   WAIT r    its sends and receives are done (the copy stream waits for them)
 *   UNPACK r  copy the lane's receive staging into place (copy stream; after WAIT r)
 *
 * so that the pack of the next round and the unpack of the previous one overlap the transfers of
 * the rounds in flight. A lane is reused only after the round that held it was waited and
 * unpacked. A rank forwards in a stage only pieces that arrived in an earlier one:
 *
 *   staged     every stage has rounds of its own, after the ones before; a rank starts a stage
 *              only when every round of the stage before has been unpacked (store and forward,
 *              one plan stage at a time);
 *   pipelined  (RF_SCHEDULE_PIPELINED, m2n and p2p) one round space for every stage, filled
 *              round after round: a segment that sends a piece on goes into a round at least
 *              `slots` rounds after every segment that brought bytes of that piece to its sender
 *              (its dependency, seg_dep: the latest of their rounds), and the sender packs it only
 *              after that round is unpacked. With `slots` lanes the rounds before it on the
 *              sender's other lanes are still in flight while it packs, so that wait is already
 *              met: a forwarding rank never stops its communication stream to unpack and pack
 *              (a dependency on the round just before held every forwarder's group for an unpack,
 *              a pack and a launch, about 10% of a round on GB200, and its peers with it). Segments
 * of a message may take rounds out of order (a fan-out does not wait behind a piece still on its
 * way), the ranks with the most bytes left are fed first, and a round holds up to the staging bound
 * over the network and a multiple of it over NVLink per rank and direction (half the NVLink / NIC
 * rate ratio of the topology, 1 .. RF_SCHEDULE_MAX_NVLINK_SHARE). Injection, forwarding and fan-out
 *              of different pieces run at the same time. */
#ifndef RF_SCHEDULE_H
#define RF_SCHEDULE_H

#include "plan.h"

#include <glib.h>
#include <stdint.h>

#define RF_SCHEDULE_ALIGN 64u /* staging offsets: enough for any element and for vector copies */
#define RF_SCHEDULE_MAX_SLOTS 8
/* pipelined rounds: most staging bounds of NVLink room a round takes beside one of network */
#define RF_SCHEDULE_MAX_NVLINK_SHARE 16

/* pipelined rounds: segments of 1 / RF_SCHEDULE_CUTS of the staging bound */
#define RF_SCHEDULE_CUTS 4

/* refit run's defaults (--staging-mib, --max-ops, --slots), which the simulator's executor
 * model and the plan's memory estimate assume too. A max_ops of RF_SCHEDULE_AUTO_OPS (the
 * default) takes rf_schedule_max_ops() of the plan. */
#define RF_SCHEDULE_DEFAULT_STAGING_BYTES (UINT64_C(32) << 20)
#define RF_SCHEDULE_AUTO_OPS 0
#define RF_SCHEDULE_DEFAULT_MAX_OPS RF_SCHEDULE_AUTO_OPS
#define RF_SCHEDULE_STAGED_MAX_OPS 32 /* staged schedules: whole-bound segments */
#define RF_SCHEDULE_DEFAULT_SLOTS 2
/* The most segments one build places (about 40 bytes each: DeepSeek-V3's pipelined
 * gather-broadcast on 512 GPUs, 245 M, took 9.6 GB); above it rf_schedule_build refuses with
 * RF_ERROR_LIMIT instead of exhausting the machine's memory (not for sizes-only builds). */
#define RF_SCHEDULE_MAX_SEGMENTS UINT64_C(256000000)

/* rf_schedule_build flags */
#define RF_SCHEDULE_SIZES_ONLY 1u /* staging maxima and round counts only (not with PIPELINED) */
#define RF_SCHEDULE_PIPELINED 2u  /* stages share rounds, ordered by their data (above) */

typedef enum { RF_SOP_PACK, RF_SOP_POST, RF_SOP_WAIT, RF_SOP_UNPACK } RfSchedOpKind;

/* One step of a rank's program. */
typedef struct {
  int32_t round; /* global round */
  uint8_t kind;  /* RfSchedOpKind */
  uint8_t lane;
  uint16_t pad_;
} RfSchedOp;

typedef struct {
  uint64_t room_bytes; /* staging bound: a round's network room per rank, direction and lane */
  uint64_t seg_bytes;  /* the largest segment: room_bytes (staged), room_bytes / RF_SCHEDULE_CUTS
                          (pipelined); segment k of a message starts at byte k x seg_bytes */
  int slots;           /* staging lanes per rank and direction (1: rounds in series) */
  int max_ops;         /* sends + receives of a rank per round (as used: never AUTO) */
  int nranks;
  uint64_t nmsgs, nsegs;
  uint64_t *seg_first; /* nmsgs + 1: segments of message m are seg_first[m] .. [m + 1) */
  int *seg_round;      /* per segment; NULL when built for sizes only */
  gboolean pipelined;
  int *seg_dep; /* pipelined: per segment, the round its sender must have unpacked first (-1) */
  int nstages, nrounds;
  int *stage_round0;             /* nstages + 1: first round of each stage */
  uint64_t *send_max, *recv_max; /* per rank: its largest staging of one round (one lane) */
} RfSchedule;

/* Progress of a long build: done of total segments placed. */
typedef void (*RfScheduleProgress)(uint64_t done, uint64_t total, void *ud);

/* The schedule of plan over nranks ranks with a staging bound (bytes per rank, direction and
 * lane), at most max_ops operations per rank and round (RF_SCHEDULE_AUTO_OPS: from the plan),
 * and slots lanes (1 .. 8). flags:
 * RF_SCHEDULE_SIZES_ONLY, only the staging maxima and round counts (seg_round NULL);
 * RF_SCHEDULE_PIPELINED (above). NULL + error (RF_ERROR_VERIFY) when the plan names a rank outside
 * the world or its messages are not sorted by stage; RF_ERROR_INPUT for a bound below one aligned
 * segment or a slot count out of range. */
RfSchedule *rf_schedule_build(const RfPlan *plan, int nranks, uint64_t staging_bytes, int max_ops,
                              int slots, unsigned flags, RfScheduleProgress progress,
                              void *progress_ud, GError **error);
/* Tests: whether the pipelined placement skips the turns of endpoints that can key no message
 * (default TRUE; FALSE visits every turn's ready messages: the same schedule, slower). Not for
 * concurrent use. */
void rf_schedule_set_turn_skip(gboolean on);
/* A lower bound on the nrounds rf_schedule_build would give with the same arguments, from one pass
 * over the messages (time linear in them, memory a few words per rank; no segment is placed):
 * every round holds at most the staging room of each rank, direction and link class and max_ops
 * operations of each rank, so a rank's aligned segment bytes and segments take at least that
 * many rounds; staged, the stages' bounds add up (rounds never span stages). 0 where
 * rf_schedule_build would fail. Lets a caller refuse a schedule too long for it without building
 * it (millions of rounds take seconds and GBs). */
uint64_t rf_schedule_rounds_lower_bound(const RfPlan *plan, int nranks, uint64_t staging_bytes,
                                        int max_ops, unsigned flags);
/* Pipelined rounds: the NVLink room of a round, in staging bounds (above); 1 without a
 * topology. */
uint64_t rf_schedule_nvlink_share(const RfPlan *plan);
/* The operation bound RF_SCHEDULE_AUTO_OPS stands for: staged, RF_SCHEDULE_STAGED_MAX_OPS;
 * pipelined, a full round of full segments both ways, 2 x RF_SCHEDULE_CUTS x (1 + the NVLink
 * share): 40 on DGX H100, 80 on GB200 NVL72 (NCCL takes up to 2,048 calls in one group). */
int rf_schedule_max_ops(const RfPlan *plan, gboolean pipelined);
/* The first and last round of the segments of message m that carry its bytes [lo, lo + len)
 * (len 0: the segment at lo): where a transfer at byte lo of its message moves. */
void rf_schedule_byte_rounds(const RfSchedule *s, uint64_t m, uint64_t lo, uint64_t len, int *first,
                             int *last);
/* Segments by round (a counting sort): offsets[r] .. offsets[r + 1] are round r's place in a
 * list of the segments in round order; nrounds + 1 entries, caller frees. */
uint64_t *rf_schedule_round_offsets(const RfSchedule *s);
/* Segments the schedule of plan holds at staging bound staging_bytes (pipelined: quarter-bound
 * segments), without building it: one pass over the messages. */
uint64_t rf_schedule_segments(const RfPlan *plan, uint64_t staging_bytes, gboolean pipelined);
/* The schedule's lockstep time: the sum over rounds of the slowest rank's time in the round, a
 * rank's time being the largest of its bytes sent and received over the network at its NICs'
 * line rate and over NVLink at the NVLink rate. What the groups would take one after another,
 * each as long as its busiest member at line rate with no other loss: a statistic of the
 * schedule, not a prediction (refit sim simulates it). 0 without a topology. */
double rf_schedule_lockstep_s(const RfSchedule *s, const RfPlan *plan);
void rf_schedule_free(RfSchedule *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(RfSchedule, rf_schedule_free)

/* Stage of a round (binary search) and its lane. */
int rf_schedule_round_stage(const RfSchedule *s, int round);
int rf_schedule_lane(const RfSchedule *s, int round);

/* The program of a rank that takes part in rounds[0 .. n) (ascending, distinct): PACK, POST,
 * WAIT and UNPACK of each, in the order the rank issues them (the dependency rules above),
 * appended to ops (RfSchedOp). needs[i] (NULL: none): the latest round the rank must have
 * unpacked before it packs rounds[i] (pipelined: the largest seg_dep of its sends there). Every
 * executor of the schedule issues exactly this sequence. */
void rf_schedule_rank_program(const RfSchedule *s, const int *rounds, const int *needs, int n,
                              GArray *ops);

/* The ascending rounds rank takes part in (a send or a receive), appended to out (int), and when
 * needs is not NULL the need of each (as rf_schedule_rank_program takes it). */
void rf_schedule_rank_rounds(const RfSchedule *s, const RfPlan *plan, int rank, GArray *out,
                             GArray *needs);

const char *rf_sched_op_name(RfSchedOpKind k);

#endif
