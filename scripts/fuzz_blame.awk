# Who is to blame for a sanitizer report from the trace fuzzer: prints "hdf5"
# or "qsa". Used by scripts/fuzz.sh; tests/fuzz/blame/ holds a report of each
# kind with its verdict in the file name (ctest fuzz.blame). With -v
# mode=start it prints instead the line number where the report starts
# (nothing when the log has none): fuzz.sh prints the report from there, and
# the pattern that recognises a report lives only here.
#
# "hdf5" when the report's faulting stack reaches libhdf5 before any qsa
# source and the memory involved is HDF5's own (allocated there, not on a qsa
# stack frame); otherwise "qsa". Unattributable reports (an out-of-memory, a
# stack of runtime frames only) count as qsa's.
#
# One exception to "the memory is HDF5's": a READ from inside libhdf5 that
# lands inside a freed chunk, before the start of a chunk, or past the end of
# a freed chunk. HDF5's decoders read past a corrupt message into whatever
# chunk lies beyond it, and that chunk's owner is chance: in CI on 2026-11-30
# and 2026-12-02 it was an exception qsa had freed for an earlier input. qsa
# could only be at fault there by handing HDF5 a pointer it had freed, and it
# never does: every name and buffer it passes outlives the call, which the
# ASan run of the unit tests checks on every call path. A read just past the
# end of a live chunk still counts against the chunk's owner (a name qsa did
# not terminate, say), and so does any write.
function owner(line) {
  if (line ~ /libhdf5/) return "hdf5"
  if (line ~ /\/(harness|reference|gpu|tests)\/[^ ]*\.(cpp|hpp|hip):[0-9]+/) return "qsa"
  return ""
}
BEGIN { section = "access" }
/ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|deadly signal/ { if (!reported) start = NR; reported = 1 }
!reported { next }
/^READ of size/ { read = 1 }
/is located .*(inside of|to the left of) .*region/ { stray = 1 }
/is located .*to the right of .*region/ { past_end = 1 }
/freed by thread/ { freed = 1 }
/allocated by thread|freed by thread/ { section = "memory"; next }
/is located in stack of thread/ { section = "stack"; next }
/^ *#[0-9]+ 0x/ { o = owner($0); if (o != "" && !(section in first)) first[section] = o }
END {
  if (mode == "start") {
    if (reported) print start
    exit
  }
  memory_hdf5 = !("memory" in first) || first["memory"] == "hdf5" || (read && (stray || (past_end && freed)))
  hdf5 = first["access"] == "hdf5" && memory_hdf5 && first["stack"] != "qsa"
  print hdf5 ? "hdf5" : "qsa"
}
