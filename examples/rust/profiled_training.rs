//! A small CPU training loop (a one-hidden-layer MLP fitting `y = Σ sin(xᵢ)`, in plain
//! Rust) annotated with mlprof's profiling API, serving `tensorflow.ProfilerService` so
//! that TensorBoard's Capture Profile, `tf.profiler.experimental.client.trace` or
//! `mlprof capture` can capture it while it runs.
//!
//! ```text
//! cargo run -p mlprof --example profiled_training -- --port 6009 --seconds 60
//! # then capture localhost:6009, e.g. from Python:
//! #   tf.profiler.experimental.client.trace("grpc://localhost:6009", "logs", 2000)
//! ```
//!
//! Each iteration is one `step("train", n)` (XProf's step marker: `step_num` and
//! `_r=1`) with nested `trace` scopes for input preparation, forward, backward and
//! update. With `--logdir DIR` it also records steps 10–29 programmatically
//! (`Profiler::start`/`stop`) and saves them to `DIR/plugins/profile/<time>/`.

use std::io::Write;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use clap::Parser;
use mlprof_capture::server::{Profiler, ServerBuilder, step, trace, trace_scope};

#[derive(Parser)]
struct Args {
    /// Port of the profiler server (0: any free port).
    #[arg(long, default_value_t = 6009)]
    port: u16,
    /// Address to listen on (0.0.0.0 to allow remote captures).
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long)]
    seconds: Option<f64>,
    /// Also record steps 10-29 with `Profiler` and save them under this log directory.
    #[arg(long)]
    logdir: Option<std::path::PathBuf>,
}

const INPUTS: usize = 8;
const HIDDEN: usize = 256;
const BATCH: usize = 128;

/// Weights of `ŷ = w2 · relu(W1 x + b1) + b2`.
struct Mlp {
    w1: Vec<f32>, // HIDDEN × INPUTS, row-major
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: f32,
}

/// A tiny xorshift generator, so the example needs no dependency for random numbers.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let server = ServerBuilder::new().ip(args.host).port(args.port).start()?;
    println!("listening on {}", server.local_addr());
    std::io::stdout().flush()?;

    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut net = Mlp {
        w1: (0..HIDDEN * INPUTS).map(|_| rng.uniform() * 0.5).collect(),
        b1: vec![0.0; HIDDEN],
        w2: (0..HIDDEN).map(|_| rng.uniform() * 0.1).collect(),
        b2: 0.0,
    };
    let deadline = args.seconds.map(|s| Instant::now() + Duration::from_secs_f64(s));
    let mut profiler = None;
    for n in 0u64.. {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if let Some(dir) = &args.logdir {
            if n == 10 {
                profiler = Some(Profiler::start()?);
            } else if n == 30
                && let Some(p) = profiler.take()
            {
                eprintln!("saved {}", p.stop().save(dir)?.display());
            }
        }
        let loss = train_step(&mut net, &mut rng, n);
        if n % 200 == 0 {
            eprintln!("step {n}: loss {loss:.4}");
        }
    }
    server.shutdown()?;
    Ok(())
}

/// One SGD step on a fresh batch; returns the batch's mean squared error.
fn train_step(net: &mut Mlp, rng: &mut Rng, n: u64) -> f32 {
    let _step = step("train", n);
    let (xs, ys) = {
        let _t = trace("input", &[("batch", BATCH)]);
        let xs: Vec<f32> = (0..BATCH * INPUTS).map(|_| rng.uniform() * 3.0).collect();
        let ys: Vec<f32> = xs.chunks(INPUTS).map(|x| x.iter().map(|v| v.sin()).sum()).collect();
        (xs, ys)
    };
    let (hidden, out) = {
        let _t = trace_scope("forward");
        let mut hidden = vec![0.0f32; BATCH * HIDDEN];
        for (x, h) in xs.chunks(INPUTS).zip(hidden.chunks_mut(HIDDEN)) {
            for (j, hj) in h.iter_mut().enumerate() {
                let row = &net.w1[j * INPUTS..(j + 1) * INPUTS];
                *hj = (row.iter().zip(x).map(|(w, v)| w * v).sum::<f32>() + net.b1[j]).max(0.0);
            }
        }
        let out: Vec<f32> = hidden.chunks(HIDDEN).map(|h| dot(h, &net.w2) + net.b2).collect();
        (hidden, out)
    };
    let mut guard = trace_scope("backward");
    let errors: Vec<f32> = out.iter().zip(&ys).map(|(o, y)| o - y).collect();
    let loss = errors.iter().map(|e| e * e).sum::<f32>() / BATCH as f32;
    guard.add_arg("loss", loss);
    let (mut gw1, mut gb1, mut gw2, mut gb2) = (vec![0.0; HIDDEN * INPUTS], vec![0.0; HIDDEN], vec![0.0; HIDDEN], 0.0);
    for ((x, h), e) in xs.chunks(INPUTS).zip(hidden.chunks(HIDDEN)).zip(&errors) {
        let g = 2.0 * e / BATCH as f32;
        gb2 += g;
        for j in 0..HIDDEN {
            gw2[j] += g * h[j];
            if h[j] > 0.0 {
                let gh = g * net.w2[j];
                gb1[j] += gh;
                gw1[j * INPUTS..(j + 1) * INPUTS].iter_mut().zip(x).for_each(|(gw, v)| *gw += gh * v);
            }
        }
    }
    drop(guard);
    let lr = 0.02;
    let _t = trace("update", &[("lr", lr)]);
    net.w1.iter_mut().zip(&gw1).for_each(|(w, g)| *w -= lr * g);
    net.b1.iter_mut().zip(&gb1).for_each(|(b, g)| *b -= lr * g);
    net.w2.iter_mut().zip(&gw2).for_each(|(w, g)| *w -= lr * g);
    net.b2 -= lr * gb2;
    loss
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
