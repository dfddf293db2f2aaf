/* Preloaded (LD_PRELOAD) into every process of the sanitized tests (tests/sanitizers/env.sh builds
 * it, uninstrumented): dlclose does nothing, so the modules OpenMPI loads (its MCA components) stay
 * mapped until the process exits. LeakSanitizer then names the module of every frame of an allocation
 * made in them, and lsan.supp's suppressions by module match with the fast unwinder, whose stacks stop
 * at OpenMPI's first frame (OpenMPI is built without frame pointers). Without it a component unloaded by
 * MPI_Finalize is "<unknown module>" and nothing can match it. Test processes only; zerodp never
 * depends on it. */
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
