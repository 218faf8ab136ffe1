#ifndef CPREFETCH_H
#define CPREFETCH_H
// Asks the CPU to start loading the cache line at `address` for writing, without waiting for
// it. Never faults, whatever the address. The rebuild's folding thread calls it for the states
// of the events a few ahead of the one it folds, and its encoding threads for the states of the
// keys a few ahead of the one they encode (Swift has no prefetch of its own).
static inline void ledger_prefetch(const void *address) { __builtin_prefetch(address, 1, 3); }
#endif
