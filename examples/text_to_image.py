"""A diffusers text-to-image pipeline on "tpu" (docs/diffusers.md).

Assembles a Stable Diffusion pipeline from tiny random components (a conditional UNet, a KL
autoencoder, a CLIP text encoder and a word-level tokenizer, all built offline from their config
classes: nothing is downloaded), runs a few denoising steps with classifier-free guidance on the
CPU and on "tpu" from the same generator seed, compares the images, and prints the estimated TPU
time of one denoising step for several chips.

    python examples/text_to_image.py [--steps 4] [--guidance 7.5] [--chips v5e,v6e,v7]
"""
from __future__ import annotations

import argparse
import copy
import time

import torch

import torchtpu

PROMPT = "a photograph of an astronaut riding a horse"
WORDS = sorted(set((PROMPT + " a painting of a red cat on the moon").split()))


def tokenizer():
    """A word-level tokenizer over a few words, with CLIP's special tokens and a short context."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<|endoftext|>", "<|startoftext|>", "<unk>"] + WORDS)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, model_max_length=16, unk_token="<unk>",
                                   pad_token="<|endoftext|>", bos_token="<|startoftext|>",
                                   eos_token="<|endoftext|>")


def pipeline(scheduler: str = "ddim"):
    """A StableDiffusionPipeline from tiny random components (seeded: the same every call)."""
    from diffusers import (AutoencoderKL, DDIMScheduler, EulerDiscreteScheduler,
                           StableDiffusionPipeline, UNet2DConditionModel)
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(32, 64), norm_num_groups=32, cross_attention_dim=32,
        attention_head_dim=(2, 4),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))
    vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(32, 64),
                        down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2, norm_num_groups=32, sample_size=32)
    tok = tokenizer()
    text = CLIPTextModel(CLIPTextConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=2, num_attention_heads=4,
                                        max_position_embeddings=16, eos_token_id=0, bos_token_id=1,
                                        pad_token_id=0, projection_dim=32))
    common = dict(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                  num_train_timesteps=1000, steps_offset=1)
    sched = (DDIMScheduler(clip_sample=False, set_alpha_to_one=False, **common) if scheduler == "ddim"
             else EulerDiscreteScheduler(**common))
    return StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=tok, unet=unet, scheduler=sched,
                                   safety_checker=None, feature_extractor=None,
                                   requires_safety_checker=False)


def generate(pipe, device: str, steps: int, guidance: float, seed: int = 0,
             output_type: str = "pt") -> torch.Tensor:
    """Images (batch, 3, 32, 32) in [0, 1], generated on `device` from a CPU generator's seed (the
    initial latents are drawn on the CPU, as diffusers does for a CPU generator)."""
    pipe = pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    g = torch.Generator("cpu").manual_seed(seed)
    with torch.no_grad():
        out = pipe(PROMPT, num_inference_steps=steps, guidance_scale=guidance, generator=g,
                   height=32, width=32, output_type=output_type)
    return out.images.to("cpu") if output_type == "pt" else out.images


def per_step_estimates(pipe, steps: int, guidance: float, chips: list[str]) -> dict:
    """The estimated TPU time of one denoising step per chip (ms): the launches charged between
    two of the pipeline's step callbacks; the first step, which also pays the text encoding and
    the initial latents, is left out (steps >= 2)."""
    pipe = pipe.to("tpu")
    pipe.set_progress_bar_config(disable=True)
    marks: list[dict] = []

    def mark(_pipe, _i, _t, kwargs):
        torchtpu.sync()
        marks.append({c: torchtpu.metrics.estimate(chip=c)["device_time_s"] * 1e3 for c in chips})
        return kwargs

    torchtpu.sync()
    torchtpu.metrics.reset()
    with torch.no_grad():
        pipe(PROMPT, num_inference_steps=steps, guidance_scale=guidance,
             generator=torch.Generator("cpu").manual_seed(0), height=32, width=32,
             output_type="latent", callback_on_step_end=mark)
    return {c: sum(b[c] - a[c] for a, b in zip(marks, marks[1:])) / (len(marks) - 1) for c in chips}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=4, help="at least 2")
    p.add_argument("--guidance", type=float, default=7.5)
    p.add_argument("--chips", default="v5e,v6e,v7")
    args = p.parse_args()
    pipe = pipeline()
    t0 = time.perf_counter()
    cpu = generate(copy.deepcopy(pipe), "cpu", args.steps, args.guidance)
    t1 = time.perf_counter()
    tpu = generate(copy.deepcopy(pipe), "tpu", args.steps, args.guidance)
    t2 = time.perf_counter()
    diff = (tpu - cpu).abs().max().item()
    print(f"{args.steps} denoising steps, guidance {args.guidance}: image {tuple(tpu.shape)}, "
          f"max |tpu - cpu| {diff:.2e} (host: cpu {t1 - t0:.2f} s, tpu {t2 - t1:.2f} s, "
          f"eager mode {torchtpu.get_eager_mode()})")
    print("CPU fallbacks:", torchtpu.metrics.fallbacks() or "none")
    for chip, ms in per_step_estimates(pipe, args.steps, args.guidance, args.chips.split(",")).items():
        print(f"  {chip}: estimated {ms * 1e3:.1f} us of TPU time per denoising step "
              f"({'two UNet passes, with' if args.guidance > 1 else 'one UNet pass, without'} "
              f"classifier-free guidance)")


if __name__ == "__main__":
    main()
