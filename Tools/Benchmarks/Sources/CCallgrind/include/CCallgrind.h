// Marks the phase a benchmark case measures, for callgrind: its instruction count, every thread
// included, is dumped on its own (valgrind's client requests; no-ops when not under valgrind or
// when valgrind's headers are missing).
#ifndef CCALLGRIND_H
#define CCALLGRIND_H

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
static inline void callgrind_phase_begin(void) { CALLGRIND_ZERO_STATS; }
static inline void callgrind_phase_end(void) { CALLGRIND_DUMP_STATS_AT("phase"); }
#else
static inline void callgrind_phase_begin(void) {}
static inline void callgrind_phase_end(void) {}
#endif

#endif
