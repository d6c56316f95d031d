/*
 * Replays files through a fuzz target's LLVMFuzzerTestOneInput without
 * libFuzzer, so the checked-in seed corpora run as ordinary tests in every
 * build (any compiler, any sanitizer). Arguments are files or directories
 * (not recursive). A failed property aborts, as under libFuzzer.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Run one file; returns 1 if it was run, 0 if it could not be read. */
static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return 0;
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    return 0;
  }
  size_t size = (size_t)st.st_size;
  uint8_t *data = malloc(size ? size : 1); /* exact size: overreads are caught */
  if (data == NULL || fread(data, 1, size, f) != size) {
    fclose(f);
    free(data);
    return 0;
  }
  fclose(f);
  printf("replay %s (%zu bytes)\n", path, size);
  fflush(stdout);
  LLVMFuzzerTestOneInput(data, size);
  free(data);
  return 1;
}

int main(int argc, char **argv) {
  long run = 0, unreadable = 0;
  for (int i = 1; i < argc; i++) {
    DIR *d = opendir(argv[i]);
    if (d == NULL) {
      if (replay_file(argv[i]))
        run++;
      else
        unreadable++;
      continue;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      size_t n = strlen(argv[i]) + strlen(e->d_name) + 2;
      char *path = malloc(n);
      if (path == NULL) return 2;
      snprintf(path, n, "%s/%s", argv[i], e->d_name);
      if (replay_file(path))
        run++;
      else
        unreadable++;
      free(path);
    }
    closedir(d);
  }
  printf("replayed %ld inputs, %ld unreadable\n", run, unreadable);
  return run > 0 && unreadable == 0 ? 0 : 1;
}
