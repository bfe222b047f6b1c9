/*
 * brawlpit.h — the single source of truth for BRAWLPIT's wire protocol and
 * game constants.  C includes it; Python (brawlkit's constants module) parses the
 * `#define BP_*` lines of this file at import time, so no constant is typed
 * twice.  Keep every `#define BP_...` a plain numeric literal (int, hex, or
 * float with optional `f`) on one line: that is all the Python parser reads.
 *
 * ======================================================================
 * WIRE FORMAT (protocol version BP_PROTO_VERSION; docs/protocol.md is normative)
 * ======================================================================
 * All integers little-endian, structs packed (no padding), floats IEEE-754
 * binary32.  Every datagram starts with a NetHeader:
 *
 *   off type field    meaning
 *   0   u16  magic    BP_MAGIC (0xB17E)
 *   2   u8   version  BP_PROTO_VERSION
 *   3   u8   type     BP_PKT_* below
 *   4   u32  seq      sender's packet sequence number
 *   8   u32  tick     server tick the packet refers to
 *
 * Packet               direction        total bytes   payload after header
 * HELLO    (1)  client -> server        12 + 20       NetHello
 * WELCOME  (2)  server -> client        12 + 28       NetWelcome
 * CMD      (3)  client -> server        12 + 28       UserCmd
 * SNAPSHOT (4)  server -> client        12 + 16 + 64  MatchState, NetPlayer[2]
 * BYE      (5)  client -> server        12 + 4        NetBye
 * RESET    (6)  client -> server        12 + 16       NetReset
 * ERROR    (7)  server -> client        12 + 40       NetError
 * IDENT    (8)  client -> server        12 + 228      NetIdent
 * PEER     (9)  server -> client        12 + 232      NetPeer
 * BATCH    (10) client -> server        12 + 8 + k*48 NetBatch, k x (NetBatchItem, CMD datagram)
 * BATCH_SNAP (11) server -> client      12 + 8 + k*100 NetBatch, k x (NetBatchItem, SNAPSHOT datagram)
 *
 * A datagram whose length is not exactly the size above for its type, whose
 * magic/version is wrong, whose type is unknown or server-bound-invalid, or
 * whose session token / slot does not match a joined client, is dropped and
 * counted in the server's drop counters (printed as a `stats` line on stderr
 * on SIGUSR1 and on exit).  Nothing a peer sends can crash or stall it.
 *
 * Session flow:
 *   client HELLO(want_slot) -> server WELCOME(session, slot, ...) or ERROR.
 *   A HELLO from an address that already holds a slot re-sends its WELCOME
 *   (lost-datagram safe).  The match starts (phase PLAYING) once both slots
 *   are filled (by clients and/or the built-in CPU).
 *   client CMD(session, tick, cmd_seq, stick, buttons, slot, repeat) ...
 *   server SNAPSHOT to every joined client (see modes below).
 *   client RESET(session, seed, cpu_level) -> fresh match, match_id+1, tick
 *   0; command queues and per-slot cmd_seq/ack state are cleared (cmd_seq
 *   may restart per match); every client gets a SNAPSHOT.
 *   client BYE(session) -> slot freed (match pauses in WAITING until refilled).
 *   Once OVER, every CMD is answered with the final SNAPSHOT until a RESET.
 *   client IDENT(session, name, ticket) -> the slot's name; the server sends
 *   PEER(slot 0), PEER(slot 1) to every client of the arena on each join,
 *   leave, name change and new match (an IDENT changing nothing: to the
 *   sender only).  HELLO(want_slot BP_SLOT_SPECTATE, JOIN arena_id) ->
 *   WELCOME(slot 254): a spectator gets every SNAPSHOT / PEER the arena
 *   broadcasts, may not CMD / RESET / IDENT (ERROR BAD_SLOT), at most
 *   BP_MAX_SPECTATORS, never keeps the arena alive.
 *
 * Modes (BP_MODE_*):
 *   REALTIME     ticks at 60 Hz wall clock, snapshot to each client each tick.
 *   FASTFORWARD  free-runs at --speed x 60 Hz, snapshot every tick; the latest
 *                command of each slot is held until replaced.
 *   LOCKSTEP     the server advances tick t only when every client-held slot
 *                has a command covering t (cmd.tick <= t < cmd.tick+repeat,
 *                or cmd.tick > t: ticks before a client's first queued
 *                command are neutral input, which is how an input delay is
 *                expressed).  It sends one SNAPSHOT to every client each
 *                time it stops to wait for input (and in reply to any CMD
 *                that does not let it advance, so a lost snapshot is
 *                recovered by re-sending the CMD).
 */
#ifndef BRAWLPIT_H
#define BRAWLPIT_H

#include <stdint.h>

/* ---------------------------------------------------------------- protocol */
#define BP_MAGIC 0xB17E
#define BP_PROTO_VERSION 2

#define BP_PKT_HELLO 1
#define BP_PKT_WELCOME 2
#define BP_PKT_CMD 3
#define BP_PKT_SNAPSHOT 4
#define BP_PKT_BYE 5
#define BP_PKT_RESET 6
#define BP_PKT_ERROR 7
#define BP_PKT_IDENT 8 /* c->s NetIdent: the sender's player name (and ticket) */
#define BP_PKT_PEER 9  /* s->c NetPeer: who holds a slot of the arena */
/* c->s: the CMD datagrams of up to BP_BATCH_MAX seated clients of one host in one
 * datagram; s->c: the SNAPSHOT each of them got while the server handled it
 * (docs/protocol.md "Batches": the fast lane's one send and one receive per step) */
#define BP_PKT_BATCH 10
#define BP_PKT_BATCH_SNAP 11
/* items of a BATCH / BATCH_SNAP (1..BP_BATCH_MAX; a BATCH_SNAP may have 0) */
#define BP_BATCH_MAX 128

#define BP_BTN_JUMP 1
#define BP_BTN_ATTACK 2
#define BP_BTN_SPECIAL 4
#define BP_BTN_SHIELD 8
#define BP_BTN_MASK 15

#define BP_MODE_REALTIME 0
#define BP_MODE_FASTFORWARD 1
#define BP_MODE_LOCKSTEP 2

#define BP_PHASE_WAITING 0
#define BP_PHASE_PLAYING 1
#define BP_PHASE_OVER 2

#define BP_WINNER_DRAW 2
#define BP_WINNER_NONE 255

/* HELLO.want_slot: a slot number, or this for "any free slot" */
#define BP_SLOT_ANY 255
/* HELLO.want_slot: watch arena_id (arena_op BP_ARENA_JOIN) without a slot; WELCOME.slot */
#define BP_SLOT_SPECTATE 254
/* spectators per arena (more are refused with BP_ERR_FULL) */
#define BP_MAX_SPECTATORS 4
/* NetIdent / NetPeer name: printable ASCII 0x20..0x7e, NUL-padded, at most 31 chars */
#define BP_NAME_LEN 32
/* NetIdent / NetPeer ticket: printable ASCII, NUL-padded, at most 191 chars; empty = anonymous */
#define BP_TICKET_LEN 192
/* NetPeer.kind: who holds the slot */
#define BP_PEER_EMPTY 0
#define BP_PEER_CLIENT 1
#define BP_PEER_CPU 2
/* HELLO.arena_op: what a client asks for (protocol v2, docs/protocol.md "Arenas") */
#define BP_ARENA_CREATE 0 /* a new arena of its own (mode, cpu_level, seed, speed as given) */
#define BP_ARENA_JOIN 1   /* the arena arena_id (e.g. an opponent joining slot 1) */
#define BP_ARENA_ANY 2    /* the oldest arena with want_slot free and this mode, else a new one */
/* HELLO.mode / .cpu_level: take the server's command-line default */
#define BP_MODE_DEFAULT 255
/* hard bound of --max-arenas (memory is allocated per arena slot up front) */
#define BP_MAX_ARENAS 4096
/* RESET.cpu_level: keep the current CPU configuration */
#define BP_CPU_KEEP 255
/* RESET.cpu_level: no CPU, slot 1 is for a client */
#define BP_CPU_NONE 0
#define BP_CPU_LEVEL_MIN 1
#define BP_CPU_LEVEL_MAX 8

/* UserCmd.repeat upper bound; larger values are dropped as malformed */
#define BP_MAX_REPEAT 64
/* how far ahead of the server tick a command may start (ticks) */
#define BP_MAX_CMD_LEAD 600

#define BP_ERR_FULL 1
#define BP_ERR_BAD_SLOT 2
#define BP_ERR_BAD_SESSION 3
#define BP_ERR_BAD_REQUEST 4
#define BP_ERR_NO_ARENA 5     /* JOIN of an arena id that does not exist */
#define BP_ERR_ARENAS_FULL 6  /* CREATE (or ANY) while --max-arenas arenas exist */
#define BP_ERR_VERSION 7      /* a HELLO of another protocol version */

#define BP_PLAYER_FLAG_ON_GROUND 1
#define BP_PLAYER_FLAG_SHIELDING 2
#define BP_PLAYER_FLAG_HITSTUN 4
#define BP_PLAYER_FLAG_ATTACKING 8
#define BP_PLAYER_FLAG_INVULNERABLE 16
#define BP_PLAYER_FLAG_OFFSTAGE 32

/* ---------------------------------------------------------------- time */
#define BP_TICK_HZ 60
#define BP_MATCH_SECONDS 150
#define BP_MATCH_TICKS 9000
#define BP_STOCKS 3

/* ---------------------------------------------------------------- stage
 * Units are "stage units"; the main stage top surface is y = 0 and spans
 * x in [-BP_STAGE_HALF_WIDTH, +BP_STAGE_HALF_WIDTH]; the stage is a solid
 * block down to y = -BP_STAGE_DEPTH.  A fighter whose centre leaves the blast
 * box loses a stock.  Velocities are units per tick. */
#define BP_STAGE_HALF_WIDTH 85.0f
#define BP_STAGE_DEPTH 30.0f
#define BP_BLAST_X 224.0f
#define BP_BLAST_TOP 200.0f
#define BP_BLAST_BOTTOM -108.0f
/* ledge snap box: horizontal reach outside the edge, depth below the top */
#define BP_LEDGE_GRAB_X 10.0f
#define BP_LEDGE_GRAB_Y 14.0f
#define BP_SPAWN_X 40.0f
#define BP_SPAWN_Y 0.0f
#define BP_RESPAWN_Y 60.0f
#define BP_RESPAWN_INVULN_TICKS 120

/* ---------------------------------------------------------------- fighter */
#define BP_DAMAGE_MAX 999.0f
#define BP_SHIELD_MAX 60.0f
#define BP_FIGHTER_WEIGHT 100.0f

/* NetPlayer.action_state (sim.c).  A fighter is actionable in IDLE, WALK, AIR
 * and SHIELD; everything else is a committed move, stun, or not in play. */
#define BP_AS_IDLE 0
#define BP_AS_WALK 1
#define BP_AS_JUMPSQUAT 2
#define BP_AS_AIR 3
#define BP_AS_ATTACK 4
#define BP_AS_SPECIAL 5
#define BP_AS_UPSPECIAL 6
#define BP_AS_HELPLESS 7
#define BP_AS_SHIELD 8
#define BP_AS_SHIELDSTUN 9
#define BP_AS_SHIELDBREAK 10
#define BP_AS_HITSTUN 11
#define BP_AS_LEDGE 12
#define BP_AS_LEDGECLIMB 13
#define BP_AS_LAG 14
#define BP_AS_RESPAWN 15
#define BP_AS_DEAD 16
#define BP_AS_COUNT 17
/* fighter body (x, y is the bottom centre): hurtbox half-width and height */
#define BP_FIGHTER_HALF_WIDTH 4.0f
#define BP_FIGHTER_HEIGHT 14.0f

/* ---------------------------------------------------------------- observation
 * docs/observation.md (normative order, BP_OBS_DIM float32).  Both builders compute in
 * double from the float32 packet fields and cast each value to float32. */
#define BP_OBS_DIM 31
#define BP_ACT_DIM 6
#define BP_POSTURE_COUNT 5
/* first index of the posture one-hot (neutral, aggressive, patient, edgeguard, recover) */
#define BP_OBS_POSTURE_OFFSET 16
#define BP_OBS_POS_X_SCALE 224.0f
#define BP_OBS_POS_Y_SCALE 200.0f
#define BP_OBS_VEL_SCALE 6.0f
#define BP_OBS_DAMAGE_SCALE 300.0f
#define BP_OBS_DIST_SCALE 448.0f
#define BP_OBS_CLOSING_SCALE 6.0f
/* time-to-blast-zone horizon, ticks (1.0 = no danger within it) */
#define BP_OBS_BLAST_HORIZON_TICKS 120.0f
#define BP_OBS_DAMAGE_DIFF_SCALE 300.0f

/* ---------------------------------------------------------------- policy input
 * docs/observation.md "Policy input layouts".  Layout 2 = the BP_OBS_DIM-value
 * observation, then what a player knows of its own fighter and controller that the
 * observation leaves out: the command it sent last step, its fighter's flags, jump,
 * hitstun and action state, and the other fighter's action state (both visible on
 * screen).  Built by obs.c (bp_input_build) and brawlkit/env/observation.py. */
#define BP_INPUT_LAYOUT_SELF 2
#define BP_INPUT_SELF_DIM 79
/* offsets of the layout-2 blocks */
#define BP_INPUT_PREV_OFFSET 31         /* 6: last command: stick x, y; 4 buttons +1/-1 */
#define BP_INPUT_FLAGS_OFFSET 37        /* 6: NetPlayer.flags bits 0..5 as 1/0 */
#define BP_INPUT_JUMP_OFFSET 43         /* 1: jumps_left, clipped to [0, 1] */
#define BP_INPUT_HITSTUN_OFFSET 44      /* 1: hitstun_ticks / BP_INPUT_HITSTUN_SCALE, clipped */
#define BP_INPUT_SELF_STATE_OFFSET 45   /* BP_AS_COUNT: own action_state one-hot */
#define BP_INPUT_OTHER_STATE_OFFSET 62  /* BP_AS_COUNT: other's action_state one-hot */
/* hitstun ticks that count as 1.0 */
#define BP_INPUT_HITSTUN_SCALE 60.0f
/* Layout 3 = layout 2, then the match clock: clip(ticks_left / BP_MATCH_TICKS, 0, 1), the
 * share of the match left.  The timer decides a match that runs out (more stocks, then
 * less damage), so a state's value depends on the time left; without it the policy sees
 * only the posture's `late` flag of the last 30 s (docs/observation.md). */
#define BP_INPUT_LAYOUT_CLOCK 3
#define BP_INPUT_CLOCK_DIM 80
#define BP_INPUT_CLOCK_OFFSET 79 /* 1: ticks_left / BP_MATCH_TICKS, clipped to [0, 1] */
/* the largest input any layout has (buffers) */
#define BP_INPUT_MAX_DIM 80

/* ---------------------------------------------------------------- policy blob (.bpw)
 * docs/bpw.md; loader in src/policy.h.  A version-2 header also records how the
 * policy was trained: action_repeat, input_layout, reward preset name. */
#define BP_BPW_VERSION 3
/* version 3 = version 2 + a noise section after the payload (u32 kind, then act_dim
 * float32 std): the sampled policy, played by the sampling rule of docs/bpw.md.  The
 * exporter writes 2 for the deterministic policy, 3 only when the blob carries noise. */
#define BP_BPW_NOISE_GAUSSIAN 1
/* largest std a noise section may hold (and > 0, finite) */
#define BP_BPW_MAX_NOISE_STD 100.0f
/* a mixture (docs/bpw.md, "Mixtures"): "BPWM", u32 BP_BPW_MIX_VERSION, u32 count K
 * (2..BP_BPW_MIX_MAX), then K x {u32 length (a multiple of 4), one raw BPW1 blob of that
 * many bytes}; all K agree on obs_dim, act_dim, action_repeat, input_layout and version.
 * A player plays ONE of them per match: k = floor(u * K), u the first uniform of the
 * sampling rule's stream seeded (match seed XOR BP_BPW_MIX_SALT). */
#define BP_BPW_MIX_VERSION 1
#define BP_BPW_MIX_MAX 16
#define BP_BPW_MIX_SALT 0x4250574D
/* action_repeat of a version-1 blob (which does not record it) */
#define BP_BPW_DEFAULT_REPEAT 4
/* input_layout 1: the BP_OBS_DIM-value observation of docs/observation.md */
#define BP_INPUT_LAYOUT_OBS 1
/* bytes of the v2 reward-name field (printable ASCII, NUL-padded) */
#define BP_BPW_REWARD_LEN 16

/* ---------------------------------------------------------------- structs */
#pragma pack(push, 1)

typedef struct {
    uint16_t magic;
    uint8_t version;
    uint8_t type;
    uint32_t seq;
    uint32_t tick;
} NetHeader;

typedef struct {
    uint32_t session;
    uint32_t tick;
    uint32_t cmd_seq;
    float stick_x;
    float stick_y;
    uint32_t buttons;
    uint8_t slot;
    uint8_t repeat;
    uint16_t reserved;
} UserCmd;

typedef struct {
    float x;
    float y;
    float vx;
    float vy;
    float damage;
    float shield;
    uint8_t stocks;
    int8_t facing;
    uint8_t flags;
    uint8_t action_state;
    uint16_t hitstun_ticks;
    uint8_t jumps_left;
    uint8_t slot;
} NetPlayer;

typedef struct {
    uint32_t match_id;
    uint32_t ticks_left;
    uint8_t phase;
    uint8_t winner;
    uint8_t n_players;
    uint8_t mode;
    uint32_t ack_cmd_seq;
} MatchState;

typedef struct {
    NetHeader hdr;
    MatchState match;
    NetPlayer players[2];
} SnapshotPacket;

/* HELLO payload: which arena (arena_op: BP_ARENA_CREATE / JOIN / ANY; arena_id
 * for JOIN) and slot (0, 1 or BP_SLOT_ANY) the client wants, and a client nonce
 * echoed in WELCOME so a client can tell replies apart.  mode, cpu_level, seed
 * and speed configure a created arena (BP_MODE_DEFAULT / BP_CPU_KEEP and speed
 * 0 take the server's command-line defaults); ANY matches mode too. */
typedef struct {
    uint8_t want_slot;
    uint8_t arena_op;
    uint8_t mode;
    uint8_t cpu_level;
    uint32_t nonce;
    uint32_t arena_id;
    uint32_t seed;
    float speed;
} NetHello;

/* WELCOME payload: the session token every later CMD/RESET/BYE must carry, and
 * the arena the client is in (what an opponent passes to join it). */
typedef struct {
    uint32_t session;
    uint32_t nonce;
    uint32_t match_id;
    uint32_t arena_id;
    uint8_t slot;
    uint8_t mode;
    uint8_t cpu_level; /* 0 = slot 1 is a client */
    uint8_t stocks;
    uint16_t tick_hz;
    uint16_t reserved;
    uint32_t match_ticks;
} NetWelcome;

typedef struct {
    uint32_t session;
} NetBye;

/* RESET payload: start a fresh match in the sender's arena with this seed;
 * cpu_level as BP_CPU_KEEP / BP_CPU_NONE / 1..8 (CPU in slot 1).  A RESET whose
 * nonce equals the arena's last applied RESET nonce is a retry: no new match,
 * the sender gets the current SNAPSHOT (so a lost RESET, or a lost answer, can be
 * re-sent safely). */
typedef struct {
    uint32_t session;
    uint32_t seed;
    uint32_t nonce;
    uint8_t cpu_level;
    uint8_t reserved[3];
} NetReset;

#define BP_ERROR_TEXT_LEN 36
typedef struct {
    uint16_t code;
    uint16_t reserved;
    char text[BP_ERROR_TEXT_LEN]; /* NUL-padded ASCII */
} NetError;

/* IDENT payload: the name (non-empty) and registry ticket (may be empty) of
 * the player holding the sender's slot; kept until the client leaves.  The
 * server answers with PEER packets (docs/protocol.md "Player identity"). */
typedef struct {
    uint32_t session;
    char name[BP_NAME_LEN];
    char ticket[BP_TICKET_LEN];
} NetIdent;

/* PEER payload: who holds `slot` of arena `arena_id` (kind BP_PEER_*; the CPU
 * is named "cpu:L", an empty slot has name ""), sent for slot 0 then slot 1 to
 * every client and spectator of the arena whenever that changes, at every new
 * match, and in answer to an IDENT that changes nothing. */
typedef struct {
    uint32_t arena_id;
    uint8_t slot;
    uint8_t kind;
    uint16_t reserved;
    char name[BP_NAME_LEN];
    char ticket[BP_TICKET_LEN];
} NetPeer;

/* BATCH / BATCH_SNAP payload, before its items: `count` items follow, each a
 * NetBatchItem and one whole datagram (a CMD of BP_PKT_CMD's size in a BATCH, a
 * SNAPSHOT in a BATCH_SNAP).  batch_seq: chosen by the client, echoed in the answer. */
typedef struct {
    uint16_t count;
    uint16_t reserved;
    uint32_t batch_seq;
} NetBatch;

/* One item's address: the seat its datagram is from (BATCH) or for (BATCH_SNAP), and
 * a tag the client chose for the CMD, echoed with that seat's SNAPSHOT. */
typedef struct {
    uint32_t arena_id;
    uint16_t tag;
    uint8_t slot;
    uint8_t reserved;
} NetBatchItem;

/* ---------------------------------------------------------------- replays (.bpr)
 * docs/replays.md.  Written by brawlpit_server --record DIR: the header, n_runs
 * BpReplayRun, then the final NetPlayer players[2].  Replaying = bp_sim_reset(seed,
 * match_id) and bp_sim_step each tick with the recorded inputs; bp_sim_state_hash
 * then equals final_hash. */
/* magic: the bytes "BPRP" (as a little-endian u32, since every BP_ define is numeric) */
#define BP_REPLAY_MAGIC 0x50525042
#define BP_REPLAY_VERSION 1
#define BP_REPLAY_HEADER_SIZE 128
typedef struct {
    char magic[4]; /* "BPRP" (BP_REPLAY_MAGIC) */
    uint16_t version;
    uint16_t header_size;
    uint32_t seed;
    uint32_t match_id;
    uint32_t arena_id;
    uint8_t mode;
    uint8_t cpu_level; /* 0 none, 1..8 the CPU in slot 1 (its inputs are recorded) */
    uint8_t complete;  /* 1 = the match reached phase over */
    uint8_t winner;    /* bp_sim_winner at the end */
    uint32_t n_ticks;  /* sum of the runs' counts */
    uint64_t final_hash;
    uint64_t start_unix_ms;
    char name0[BP_NAME_LEN];
    char name1[BP_NAME_LEN];
    uint32_t n_runs;
    uint8_t reserved[16];
} BpReplayHeader;

/* `count` consecutive ticks with the same inputs (as passed to bp_sim_step) */
typedef struct {
    uint32_t count;
    float sx0, sy0;
    uint32_t buttons0;
    float sx1, sy1;
    uint32_t buttons1;
} BpReplayRun;

#pragma pack(pop)

/* every wire struct's size, checked by the compiler (docs/protocol.md has the table) */
#define BRAWLPIT_ASSERT_SIZE(T, n) _Static_assert(sizeof(T) == (n), #T " must be " #n " bytes")
BRAWLPIT_ASSERT_SIZE(NetHeader, 12);
BRAWLPIT_ASSERT_SIZE(UserCmd, 28);
BRAWLPIT_ASSERT_SIZE(NetPlayer, 32);
BRAWLPIT_ASSERT_SIZE(MatchState, 16);
BRAWLPIT_ASSERT_SIZE(SnapshotPacket, 92);
BRAWLPIT_ASSERT_SIZE(NetHello, 20);
BRAWLPIT_ASSERT_SIZE(NetWelcome, 28);
BRAWLPIT_ASSERT_SIZE(NetBye, 4);
BRAWLPIT_ASSERT_SIZE(NetReset, 16);
BRAWLPIT_ASSERT_SIZE(NetError, 40);
BRAWLPIT_ASSERT_SIZE(NetIdent, 228);
BRAWLPIT_ASSERT_SIZE(NetPeer, 232);
BRAWLPIT_ASSERT_SIZE(NetBatch, 8);
BRAWLPIT_ASSERT_SIZE(NetBatchItem, 8);
BRAWLPIT_ASSERT_SIZE(BpReplayHeader, BP_REPLAY_HEADER_SIZE);
BRAWLPIT_ASSERT_SIZE(BpReplayRun, 28);

#endif /* BRAWLPIT_H */
