//! One H.264 track into an MP4 file (ISO-BMFF): `ftyp`, `moov`, then `mdat`.
//!
//! The boxes are `mp4-atom`'s typed structs; every field is set here, so the file is a function
//! of the samples alone: creation and modification times are 0 (the ISO-BMFF epoch, 1904), and
//! nothing else varies between runs. `moov` comes before `mdat` ("fast start"), so a browser can
//! play the file while it downloads; the one chunk offset is found by encoding `moov` once to
//! learn its size (the offset's value does not change it).
//!
//! The track: an `avc1` sample entry whose `avcC` carries the encoder's SPS and PPS, samples as
//! 4-byte length-prefixed NAL units, constant frame duration (`stts` has one entry), no
//! composition offsets (the encoder makes no B-frames, so decode order is display order), the
//! IDR frames as sync samples (`stss`), and all samples in one chunk.

use mp4_atom::{
    Avc1, Avcc, Codec, Dinf, Dref, DrefEntry, Encode, FourCC, Ftyp, Hdlr, Mdat, Mdhd, Mdia, Minf,
    Moov, Mvhd, Stbl, Stco, Stsc, StscEntry, Stsd, Stss, Stsz, StszSamples, Stts, SttsEntry, Tkhd,
    Trak, Url, Visual, Vmhd,
};

use crate::Error;

/// One coded frame: its NAL units, each behind a 4-byte big-endian length.
pub struct Sample {
    pub data: Vec<u8>,
    /// An IDR picture: decoding may start here.
    pub sync: bool,
}

/// What the muxer needs to know of the stream.
pub struct Track {
    pub width: u16,
    pub height: u16,
    /// Ticks per second, for the movie and the track.
    pub timescale: u32,
    /// Ticks per frame.
    pub frame_ticks: u32,
    /// Sequence and picture parameter sets (NAL units without start codes or lengths).
    pub sps: Vec<u8>,
    pub pps: Vec<u8>,
    pub samples: Vec<Sample>,
}

const TRACK_ID: u32 = 1;

/// The MP4 file of `track`.
pub fn write_mp4(track: &Track) -> Result<Vec<u8>, Error> {
    let media: usize = track.samples.iter().map(|s| s.data.len()).sum();
    // `stco` and `stsz` hold 32-bit values: a larger file would need `co64` and a 64-bit mdat.
    if media > (u32::MAX as usize) / 2 {
        return Err(Error::TooLarge(format!(
            "the encoded video is {media} bytes, over the 2 GiB this writer supports"
        )));
    }
    let ftyp = Ftyp {
        major_brand: FourCC::new(b"isom"),
        minor_version: 0x200,
        compatible_brands: [b"isom", b"iso2", b"avc1", b"mp41"]
            .into_iter()
            .map(FourCC::new)
            .collect(),
    };
    let mut out = Vec::with_capacity(media + 4096);
    ftyp.encode(&mut out).map_err(box_error)?;
    let mut moov = movie(track)?;
    let mut sized = Vec::new();
    moov.encode(&mut sized).map_err(box_error)?;
    // mdat's 8-byte header follows moov; the samples follow it.
    let offset = out.len() + sized.len() + 8;
    moov.trak[0].mdia.minf.stbl.stco = Some(Stco {
        entries: vec![offset as u32],
    });
    moov.encode(&mut out).map_err(box_error)?;
    debug_assert_eq!(out.len() + 8, offset);
    let mut data = Vec::with_capacity(media);
    for s in &track.samples {
        data.extend_from_slice(&s.data);
    }
    Mdat { data }.encode(&mut out).map_err(box_error)?;
    Ok(out)
}

fn movie(track: &Track) -> Result<Moov, Error> {
    let count = u32::try_from(track.samples.len())
        .map_err(|_| Error::TooLarge("too many frames for one MP4 track".into()))?;
    let duration = u64::from(count) * u64::from(track.frame_ticks);
    let sizes = track.samples.iter().map(|s| s.data.len() as u32).collect();
    let sync: Vec<u32> = (1..=count)
        .zip(&track.samples)
        .filter(|(_, s)| s.sync)
        .map(|(n, _)| n)
        .collect();
    let avcc = Avcc::new(&track.sps, &track.pps).map_err(box_error)?;
    let stbl = Stbl {
        stsd: Stsd {
            codecs: vec![Codec::Avc1(Avc1 {
                visual: Visual {
                    data_reference_index: 1,
                    width: track.width,
                    height: track.height,
                    ..Visual::default()
                },
                avcc,
                ..Avc1::default()
            })],
        },
        stts: Stts {
            entries: vec![SttsEntry {
                sample_count: count,
                sample_delta: track.frame_ticks,
            }],
        },
        // Every sample a sync sample: `stss` absent means "all are", as the format defines.
        stss: (sync.len() < track.samples.len()).then_some(Stss { entries: sync }),
        stsc: Stsc {
            entries: vec![StscEntry {
                first_chunk: 1,
                samples_per_chunk: count,
                sample_description_index: 1,
            }],
        },
        stsz: Stsz {
            samples: StszSamples::Different { sizes },
        },
        // The real offset is set once moov's size is known.
        stco: Some(Stco { entries: vec![0] }),
        ..Stbl::default()
    };
    let minf = Minf {
        vmhd: Some(Vmhd::default()),
        dinf: Dinf {
            dref: Dref {
                // An empty location: the media data is in this file.
                entries: vec![DrefEntry::Url(Url::default())],
            },
        },
        stbl,
        ..Minf::default()
    };
    let trak = Trak {
        tkhd: Tkhd {
            track_id: TRACK_ID,
            duration,
            enabled: true,
            in_movie: true,
            width: track.width.into(),
            height: track.height.into(),
            ..Tkhd::default()
        },
        mdia: Mdia {
            mdhd: Mdhd {
                timescale: track.timescale,
                duration,
                language: "und".into(),
                ..Mdhd::default()
            },
            hdlr: Hdlr {
                handler: FourCC::new(b"vide"),
                name: "VideoHandler".into(),
            },
            minf,
        },
        ..Trak::default()
    };
    Ok(Moov {
        mvhd: Mvhd {
            timescale: track.timescale,
            duration,
            rate: 1.into(),
            volume: 1.into(),
            next_track_id: TRACK_ID + 1,
            ..Mvhd::default()
        },
        trak: vec![trak],
        ..Moov::default()
    })
}

/// A box that could not be written: only a bug here (a field out of its range) makes one.
fn box_error(e: mp4_atom::Error) -> Error {
    Error::Encoder(format!("writing the MP4 boxes: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The boxes laid end to end at the top of `file`: (type, offset, size).
    fn top_boxes(file: &[u8]) -> Vec<(String, usize, usize)> {
        let mut boxes = Vec::new();
        let mut at = 0;
        while at + 8 <= file.len() {
            let size = u32::from_be_bytes(file[at..at + 4].try_into().unwrap()) as usize;
            boxes.push((
                String::from_utf8_lossy(&file[at + 4..at + 8]).into_owned(),
                at,
                size,
            ));
            assert!(size >= 8, "box size {size} at {at}");
            at += size;
        }
        assert_eq!(at, file.len(), "boxes cover the file");
        boxes
    }

    #[test]
    fn moov_leads_and_the_chunk_offset_points_at_the_samples() {
        let samples = vec![
            Sample {
                data: vec![0, 0, 0, 2, 0x65, 0x11],
                sync: true,
            },
            Sample {
                data: vec![0, 0, 0, 3, 0x41, 0x22, 0x33],
                sync: false,
            },
        ];
        let track = Track {
            width: 64,
            height: 48,
            timescale: 1000,
            frame_ticks: 40,
            sps: vec![0x67, 0x42, 0xc0, 0x1e, 0xda],
            pps: vec![0x68, 0xce, 0x3c, 0x80],
            samples,
        };
        let file = write_mp4(&track).unwrap();
        let kinds: Vec<String> = top_boxes(&file).into_iter().map(|b| b.0).collect();
        assert_eq!(kinds, ["ftyp", "moov", "mdat"]);
        let at = file.windows(4).position(|w| w == b"stco").unwrap();
        // stco: type, version/flags, entry count, the one offset.
        let offset = u32::from_be_bytes(file[at + 12..at + 16].try_into().unwrap()) as usize;
        assert_eq!(
            &file[offset..],
            &[0, 0, 0, 2, 0x65, 0x11, 0, 0, 0, 3, 0x41, 0x22, 0x33]
        );
        // One sync sample of two: stss lists sample 1.
        let at = file.windows(4).position(|w| w == b"stss").unwrap();
        assert_eq!(&file[at + 8..at + 16], &[0, 0, 0, 1, 0, 0, 0, 1]);
    }
}
