/* The load generator's statistics: percentiles by linear interpolation
 * between order statistics (numpy's default, as qtts-bench), so that the
 * median of an even count is the mean of the two middle values; a burst
 * whose first half is served early and second half late must not read as if
 * all were served early (the nearest-rank median of 8 was the 4th value). */
#include <math.h>

#include "loadgen.h"
#include "test.h"

int main(void) {
    const double eight[8] = {185, 185, 207, 210, 401, 425, 431, 461}; /* ms: 2 of 4 served early, twice */
    CHECK("loadgen: the median of an even count is the mean of the middle two",
          lg_percentile(eight, 8, 50) == (210 + 401) / 2.0, "%g", lg_percentile(eight, 8, 50));
    const double odd[5] = {1, 2, 3, 4, 100};
    CHECK("loadgen: the median of an odd count is the middle value", lg_percentile(odd, 5, 50) == 3, "%g",
          lg_percentile(odd, 5, 50));
    /* numpy.percentile([1, 2, 3, 4, 100], 95) = 80.8 */
    CHECK("loadgen: p95 interpolates between the last two", fabs(lg_percentile(odd, 5, 95) - 80.8) < 1e-9, "%g",
          lg_percentile(odd, 5, 95));
    CHECK("loadgen: p0 and p100 are the ends, one value is itself",
          lg_percentile(odd, 5, 0) == 1 && lg_percentile(odd, 5, 100) == 100 && lg_percentile(odd, 1, 50) == 1 &&
              lg_percentile(odd, 1, 95) == 1,
          "ends wrong");
    CHECK("loadgen: no values, no percentile", isnan(lg_percentile(odd, 0, 50)), "not NaN");
    /* --frames auto: 15 characters a second (4.5 for CJK) at 12.5 frames a second, rounded up */
    const char *ryan = "Hello, my name is Ryan. It is 3:45 pm on the 12th of June; are you ready to begin?";
    CHECK("loadgen: auto frames of the default text (82 characters: 5.47 s, 69 frames)",
          lg_typical_frames(ryan) == 69, "%d", lg_typical_frames(ryan));
    CHECK("loadgen: 15 Latin characters are one second, 12.5 frames rounded up to 13",
          lg_typical_frames("abcdefghijklmno") == 13, "%d", lg_typical_frames("abcdefghijklmno"));
    /* 9 ideographs (3 bytes each) = 2 s = 25 frames; counting its 27 bytes would give 23 (as Latin) or 75 (as CJK) */
    CHECK("loadgen: CJK characters count 4.5 a second, by character not byte",
          lg_typical_frames("\xe7\x8e\x8b\xe5\x85\x88\xe7\x94\x9f\xe4\xbd\xa0\xe6\x98\x8e\xe5\xa4\xa9"
                            "\xe4\xb8\x8b\xe5\x8d\x88\xe4\xb8\x89") == 25,
          "%d", lg_typical_frames("\xe7\x8e\x8b\xe5\x85\x88\xe7\x94\x9f\xe4\xbd\xa0\xe6\x98\x8e"
                                  "\xe5\xa4\xa9\xe4\xb8\x8b\xe5\x8d\x88\xe4\xb8\x89"));
    CHECK("loadgen: an accented Latin letter is one character (2 bytes)",
          lg_typical_frames("\xc3\xa9") == lg_typical_frames("e"), "%d vs %d", lg_typical_frames("\xc3\xa9"),
          lg_typical_frames("e"));
    CHECK("loadgen: empty text still one frame; broken UTF-8 counts byte by byte without overrunning",
          lg_typical_frames("") == 1 && lg_typical_frames("\xe7\x8e") == lg_typical_frames("ab") &&
              lg_typical_frames("\x80\xff") == lg_typical_frames("ab"),
          "%d %d %d", lg_typical_frames(""), lg_typical_frames("\xe7\x8e"), lg_typical_frames("\x80\xff"));
    return test_finish();
}
