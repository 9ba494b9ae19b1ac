"""Real-size random-weight models on a GPU, in half precision: build time, memory and call times.

    python bench/gpu_realsize.py                 # on a CUDA machine: real sizes, fp16
    python bench/gpu_realsize.py --tiny          # a quick check of the same code on CPU (tiny configs)
    python bench/gpu_realsize.py --only sd,detr  # some of: sd, detr, whisper

Models are built from configs (no download; weights are random, so outputs are noise but compute
and memory are those of the real architectures):
- Stable Diffusion 1.5: UNet (860 M parameters), VAE, CLIP ViT-L/14 text encoder; one 512x512 image
  = text encoding + STEPS UNet calls on a batch of 2 (classifier-free guidance) + VAE decoding;
- DETR-ResNet-50 (transformers' own ResNet backbone) on an 800x1066 image;
- Whisper-small: encoder on 30 s of log-mel features, then greedy decoding of TOKENS tokens with
  the KV cache.
Each timing is the median of --repeat calls after one warm-up call. Prints one line per measure
and a JSON summary at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any], *, repeat: int, sync: Callable[[], None]) -> float:
    """Median seconds of `repeat` calls, after one warm-up call."""
    fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def params(*modules: Any) -> int:
    return sum(p.numel() for m in modules for p in m.parameters())


# ---- Stable Diffusion 1.5 -----------------------------------------------------------------------


def build_sd(tiny: bool) -> dict[str, Any]:
    from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    if tiny:
        unet = UNet2DConditionModel(
            sample_size=8,
            block_out_channels=(8, 16),
            layers_per_block=1,
            norm_num_groups=4,
            cross_attention_dim=16,
            attention_head_dim=2,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        )
        vae = AutoencoderKL(
            block_out_channels=(8, 16),
            down_block_types=("DownEncoderBlock2D",) * 2,
            up_block_types=("UpDecoderBlock2D",) * 2,
            norm_num_groups=4,
            layers_per_block=1,
        )
        text = CLIPTextConfig(
            vocab_size=100,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=77,
            bos_token_id=0,
            eos_token_id=3,
            pad_token_id=1,
        )
    else:
        # SD 1.5's published architecture (the UNet defaults are SD's, but for the text width).
        unet = UNet2DConditionModel(sample_size=64, cross_attention_dim=768)
        vae = AutoencoderKL(
            block_out_channels=(128, 256, 512, 512),
            down_block_types=("DownEncoderBlock2D",) * 4,
            up_block_types=("UpDecoderBlock2D",) * 4,
            latent_channels=4,
            layers_per_block=2,
            sample_size=512,
        )
        text = CLIPTextConfig(
            vocab_size=49408,
            hidden_size=768,
            intermediate_size=3072,
            num_hidden_layers=12,
            num_attention_heads=12,
            max_position_embeddings=77,
            hidden_act="quick_gelu",
            projection_dim=768,
        )
    scheduler = DDIMScheduler(
        beta_schedule="scaled_linear",
        beta_start=0.00085,
        beta_end=0.012,
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    return {"unet": unet, "vae": vae, "text_encoder": CLIPTextModel(text), "scheduler": scheduler}


def bench_sd(
    parts: dict[str, Any], *, device: str, dtype: Any, steps: int, repeat: int, sync: Callable[[], None]
) -> dict[str, float]:
    import torch

    unet, vae, text_encoder, scheduler = (
        parts["unet"],
        parts["vae"],
        parts["text_encoder"],
        parts["scheduler"],
    )
    latent = unet.config.sample_size
    vocab = text_encoder.config.vocab_size
    ids = torch.randint(0, vocab, (2, 77), device=device)  # the prompt and the empty (negative) prompt
    latents = torch.randn(1, 4, latent, latent, device=device, dtype=dtype)
    scale = 2 ** (len(vae.config.block_out_channels) - 1)

    with torch.inference_mode():
        context = text_encoder(ids).last_hidden_state

        def encode() -> None:
            text_encoder(ids)

        def unet_step() -> None:
            unet(torch.cat([latents] * 2), 500, encoder_hidden_states=context)

        def decode() -> None:
            vae.decode(latents / vae.config.scaling_factor)

        def image() -> None:
            x = latents.clone()
            emb = text_encoder(ids).last_hidden_state
            scheduler.set_timesteps(steps)
            for t in scheduler.timesteps:
                noise = unet(torch.cat([x] * 2), t, encoder_hidden_states=emb).sample
                cond, uncond = noise.chunk(2)
                x = scheduler.step(uncond + 7.5 * (cond - uncond), t, x).prev_sample
            vae.decode(x / vae.config.scaling_factor)

        result = {
            "sd_text_encoder_s": timed(encode, repeat=repeat, sync=sync),
            "sd_unet_step_batch2_s": timed(unet_step, repeat=repeat, sync=sync),
            "sd_vae_decode_s": timed(decode, repeat=repeat, sync=sync),
            f"sd_image_{latent * scale}px_{steps}steps_s": timed(
                image, repeat=max(1, repeat // 3), sync=sync
            ),
        }
    return result


# ---- DETR-ResNet-50 -----------------------------------------------------------------------------


def build_detr(tiny: bool) -> Any:
    from transformers import DetrConfig, DetrForObjectDetection, ResNetConfig

    if tiny:
        backbone = ResNetConfig(
            embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", out_features=["stage2"]
        )
        config = DetrConfig(
            use_timm_backbone=False,
            backbone_config=backbone,
            use_pretrained_backbone=False,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            num_queries=5,
        )
    else:
        # ResNet-50 (bottleneck stages of 3, 4, 6, 3 blocks); DETR's defaults are the detr-resnet-50 head.
        backbone = ResNetConfig(
            embedding_size=64,
            hidden_sizes=[256, 512, 1024, 2048],
            depths=[3, 4, 6, 3],
            layer_type="bottleneck",
            out_features=["stage4"],
        )
        config = DetrConfig(
            use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False, num_labels=91
        )
    return DetrForObjectDetection(config)


def bench_detr(
    model: Any, *, device: str, dtype: Any, tiny: bool, repeat: int, sync: Callable[[], None]
) -> dict[str, float]:
    import torch

    h, w = (64, 80) if tiny else (800, 1066)
    pixels = torch.randn(1, 3, h, w, device=device, dtype=dtype)
    with torch.inference_mode():
        return {
            f"detr_forward_{h}x{w}_s": timed(lambda: model(pixel_values=pixels), repeat=repeat, sync=sync)
        }


# ---- Whisper-small ------------------------------------------------------------------------------


def build_whisper(tiny: bool) -> Any:
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    if tiny:
        config = WhisperConfig(
            vocab_size=100,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            num_mel_bins=80,
            max_source_positions=1500,
            max_target_positions=448,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=3,
        )
    else:  # whisper-small
        config = WhisperConfig(
            vocab_size=51865,
            d_model=768,
            encoder_layers=12,
            decoder_layers=12,
            encoder_attention_heads=12,
            decoder_attention_heads=12,
            encoder_ffn_dim=3072,
            decoder_ffn_dim=3072,
            num_mel_bins=80,
            max_source_positions=1500,
            max_target_positions=448,
        )
    return WhisperForConditionalGeneration(config)


def bench_whisper(
    model: Any, *, device: str, dtype: Any, tokens: int, repeat: int, sync: Callable[[], None]
) -> dict[str, float]:
    import torch

    features = torch.randn(1, 80, 3000, device=device, dtype=dtype)  # 30 s of log-mel frames

    def encode() -> Any:
        return model.model.encoder(features)

    def transcribe() -> None:
        encoded = encode()
        ids = torch.tensor([[model.config.decoder_start_token_id]], device=device)
        cache = None
        for _ in range(tokens):  # greedy, with the KV cache; random weights: never stop early
            out = model(encoder_outputs=encoded, decoder_input_ids=ids[:, -1:], cache=cache, use_cache=True)
            cache = out.cache  # transformers 5.24 names it `cache` (was past_key_values)
            ids = torch.cat([ids, out.logits[:, -1].argmax(-1, keepdim=True)], dim=1)

    with torch.inference_mode():
        return {
            "whisper_encoder_30s_s": timed(encode, repeat=repeat, sync=sync),
            f"whisper_transcribe_{tokens}tokens_s": timed(transcribe, repeat=max(1, repeat // 3), sync=sync),
        }


# ---- main ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny configs, for a quick check on CPU")
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--only", default="sd,detr,whisper")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=25, help="denoising steps of one SD image")
    parser.add_argument("--tokens", type=int, default=64, help="tokens decoded by Whisper")
    args = parser.parse_args()

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.startswith("cuda")
    dtype = torch.float16 if gpu else torch.float32
    if not gpu and not args.tiny:
        print("warning: real-size models on CPU are slow; use --tiny for a quick check")

    def sync() -> None:
        if gpu:
            torch.cuda.synchronize()

    summary: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if gpu else "cpu",
        "dtype": str(dtype),
        "tiny": args.tiny,
        "torch": torch.__version__,
    }
    builders = {"sd": build_sd, "detr": build_detr, "whisper": build_whisper}
    for name in args.only.split(","):
        if gpu:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        with torch.device(device):  # initialise the random weights on the device itself
            built = builders[name](args.tiny)
        modules = [
            m
            for m in (built.values() if isinstance(built, dict) else [built])
            if isinstance(m, torch.nn.Module)
        ]
        for m in modules:
            m.to(device=device, dtype=dtype).eval()
        sync()
        summary[f"{name}_build_s"] = time.perf_counter() - t0
        summary[f"{name}_params_M"] = params(*modules) / 1e6
        if name == "sd":
            summary.update(
                bench_sd(built, device=device, dtype=dtype, steps=args.steps, repeat=args.repeat, sync=sync)
            )
        elif name == "detr":
            summary.update(
                bench_detr(built, device=device, dtype=dtype, tiny=args.tiny, repeat=args.repeat, sync=sync)
            )
        else:
            summary.update(
                bench_whisper(
                    built, device=device, dtype=dtype, tokens=args.tokens, repeat=args.repeat, sync=sync
                )
            )
        if gpu:
            summary[f"{name}_peak_memory_GiB"] = torch.cuda.max_memory_allocated() / 2**30
        for key, value in summary.items():
            if key.startswith(name):
                print(
                    f"{key:40} {value:10.4f}" if isinstance(value, float) else f"{key:40} {value}", flush=True
                )
        del built, modules
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in summary.items()}))


if __name__ == "__main__":
    main()
