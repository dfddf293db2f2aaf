# Sourced by scripts/test.sh and scripts/test_sanitized.sh before ctest.
# Open MPI 4 makes its session directory (<tmpdir>/ompi.<host>.<uid>) when a job starts and removes it
# when the last job ends. With tests starting mpirun in parallel, one job's mkdir can lose to another's
# and the test fails before a rank runs ("A call to mkdir was unable to create the desired directory
# ... File exists", orte_init failed: seen once in CI at 5 slots, 2026-11-30). A file kept in the
# directory stops its removal, so it is made only here. Open MPI's cleanup deletes every file in it but
# the non-empty ones named output-*, hence the name.
ompi_session="${TMPDIR:-/tmp}/ompi.$(hostname | cut -d. -f1).$(id -u)"
if ! { mkdir -p "$ompi_session" && chmod 700 "$ompi_session" &&
  echo "kept by zerodp's test scripts (scripts/test/keep_ompi_session.sh)" > "$ompi_session/output-zerodp-keep"; }; then
  echo "keep_ompi_session: cannot keep $ompi_session; tests may race on making it" >&2
fi
