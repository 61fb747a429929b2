//! Which frames to take (the rule is stated in the module docs of [`super`]).

use super::SampleOptions;

/// The sampling times in seconds for a video of `duration_s` seconds: `k / fps` below the
/// duration, or, when that is more than `max_frames` times, `k * duration / max_frames` for
/// `k = 0..max_frames`. Always at least one time (0) so a one-frame video gives its frame.
pub fn pick_times(duration_s: f64, options: &SampleOptions) -> Vec<f64> {
    let duration_s = if duration_s.is_finite() {
        duration_s.max(0.0)
    } else {
        0.0
    };
    // Count of k >= 0 with k / fps < duration; the small slack keeps an exact multiple (a 4 s
    // video at 1 fps) from gaining a fifth time at 4.0 through rounding.
    let at_fps = ((duration_s * options.fps) - 1e-9).ceil().max(1.0);
    if at_fps <= options.max_frames as f64 {
        (0..at_fps as usize)
            .map(|k| k as f64 / options.fps)
            .collect()
    } else {
        let n = options.max_frames;
        (0..n).map(|k| k as f64 * duration_s / n as f64).collect()
    }
}

/// Presentation indices of the chosen frames, ascending and distinct.
///
/// `presentation` holds each frame's presentation time in ticks, ascending, the first one 0;
/// `duration` is the time in ticks from the first frame's start to the last frame's end.
pub fn choose(
    presentation: &[i64],
    timescale: u64,
    duration: i64,
    options: &SampleOptions,
) -> Vec<usize> {
    if presentation.is_empty() || timescale == 0 {
        return Vec::new();
    }
    let duration_s = duration as f64 / timescale as f64;
    let mut chosen: Vec<usize> = Vec::new();
    for t in pick_times(duration_s, options) {
        // Half a tick of slack so that k / fps landing exactly on a frame's time picks it.
        let ticks = t * timescale as f64 + 0.5;
        let on_screen = presentation
            .partition_point(|&p| (p as f64) <= ticks)
            .saturating_sub(1);
        if chosen.last() != Some(&on_screen) {
            chosen.push(on_screen);
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(fps: f64, max_frames: usize) -> SampleOptions {
        SampleOptions { fps, max_frames }
    }

    #[test]
    fn times_at_fps_below_the_duration() {
        assert_eq!(pick_times(4.0, &opts(1.0, 16)), vec![0.0, 1.0, 2.0, 3.0]);
        assert_eq!(
            pick_times(2.5, &opts(2.0, 16)),
            vec![0.0, 0.5, 1.0, 1.5, 2.0]
        );
        // A video shorter than one period still gives its first frame.
        assert_eq!(pick_times(0.2, &opts(1.0, 16)), vec![0.0]);
        assert_eq!(pick_times(0.0, &opts(1.0, 16)), vec![0.0]);
    }

    #[test]
    fn times_spread_evenly_when_over_max_frames() {
        // 100 s at 1 fps would be 100 frames: 4 spread over the whole video instead.
        assert_eq!(
            pick_times(100.0, &opts(1.0, 4)),
            vec![0.0, 25.0, 50.0, 75.0]
        );
    }

    #[test]
    fn choose_takes_the_frame_on_screen_once() {
        // 8 frames at 4 fps in ticks of 1/100 s: 0, 25, ..., 175; duration 2 s.
        let pts: Vec<i64> = (0..8).map(|i| i * 25).collect();
        assert_eq!(choose(&pts, 100, 200, &opts(1.0, 16)), vec![0, 4]);
        assert_eq!(
            choose(&pts, 100, 200, &opts(3.0, 16)),
            vec![0, 1, 2, 4, 5, 6]
        );
        // 60 fps on a 4 fps video: every source frame once.
        assert_eq!(
            choose(&pts, 100, 200, &opts(60.0, 64)),
            (0..8).collect::<Vec<_>>()
        );
        // Capped to 2: times 0 and 1 s.
        assert_eq!(choose(&pts, 100, 200, &opts(60.0, 2)), vec![0, 4]);
    }
}
