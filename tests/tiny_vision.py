"""Tiny random-weight vision, multimodal and diffusion models, built from configs and saved to a folder.

Each builder writes a model with its processor (tokenizers made here with the `tokenizers` library)
into `folder` with save_pretrained, so the runtime loads it by path exactly as it loads a hub
snapshot. Weights are random: outputs are noise; tests check wiring, files and shapes.
Session-scoped fixtures at the bottom build each model once per test session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

WORDS = ["a", "the", "cat", "dog", "photo", "of", "red", "blue", "what", "is", "in", "image", "two", "sky"]
SIZE = 32  # input side of the tiny image models


def word_tokenizer(*, specials: list[str], extra: list[str] = (), max_len: int = 64, **roles):
    """A word-level fast tokenizer: whitespace split, a fixed vocabulary, [UNK] for the rest."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate([*specials, *extra, *WORDS, "?", ".", ","])}
    core = Tokenizer(models.WordLevel(vocab, unk_token=roles.get("unk_token", specials[0])))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, model_max_length=max_len, **roles)


def _bert_tokenizer(max_len: int = 32):
    from tokenizers import processors

    tok = word_tokenizer(
        specials=["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"],
        max_len=max_len,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return tok


def _labels(n: int) -> dict:
    return {"id2label": {i: f"class{i}" for i in range(n)}, "label2id": {f"class{i}": i for i in range(n)}}


# ---- transformers vision ------------------------------------------------------------------------


def build_vit_classifier(folder: Path) -> Path:
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    config = ViTConfig(
        image_size=SIZE,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        **_labels(6),
    )
    ViTForImageClassification(config).save_pretrained(folder)
    ViTImageProcessor(size={"height": SIZE, "width": SIZE}).save_pretrained(folder)
    return folder


def build_detr(folder: Path) -> Path:
    # A small ResNet backbone from transformers itself (DETR's default backbone needs timm).
    from transformers import DetrConfig, DetrForObjectDetection, DetrImageProcessor, ResNetConfig

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
        **_labels(4),
    )
    DetrForObjectDetection(config).save_pretrained(folder)
    DetrImageProcessor(size={"shortest_edge": SIZE, "longest_edge": SIZE * 2}).save_pretrained(folder)
    return folder


def build_segformer(folder: Path) -> Path:
    from transformers import SegformerConfig, SegformerForSemanticSegmentation, SegformerImageProcessor

    config = SegformerConfig(
        num_encoder_blocks=2,
        depths=[1, 1],
        sr_ratios=[2, 1],
        hidden_sizes=[8, 16],
        num_attention_heads=[1, 2],
        patch_sizes=[7, 3],
        strides=[4, 2],
        mlp_ratios=[2, 2],
        decoder_hidden_size=16,
        **_labels(5),
    )
    SegformerForSemanticSegmentation(config).save_pretrained(folder)
    SegformerImageProcessor(size={"height": SIZE, "width": SIZE}).save_pretrained(folder)
    return folder


def build_dpt(folder: Path) -> Path:
    from transformers import DPTConfig, DPTForDepthEstimation, DPTImageProcessor

    config = DPTConfig(
        image_size=SIZE,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=37,
        backbone_out_indices=[0, 1, 2, 3],
        neck_hidden_sizes=[8, 8, 16, 16],
        fusion_hidden_size=16,
        head_hidden_size=8,
    )
    DPTForDepthEstimation(config).save_pretrained(folder)
    DPTImageProcessor(size={"height": SIZE, "width": SIZE}, keep_aspect_ratio=False).save_pretrained(folder)
    return folder


def build_vitpose(folder: Path, experts: int = 1) -> Path:
    """ViTPose with COCO's 17 keypoints; experts > 1 makes a ViTPose+ (mixture of experts) backbone."""
    from transformers import (
        VitPoseBackboneConfig,
        VitPoseConfig,
        VitPoseForPoseEstimation,
        VitPoseImageProcessor,
    )

    backbone = VitPoseBackboneConfig(
        image_size=[64, 48],
        patch_size=[16, 16],
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        out_indices=[2],
        num_experts=experts,
        part_features=8,
    )
    config = VitPoseConfig(backbone_config=backbone, num_labels=17)
    VitPoseForPoseEstimation(config).save_pretrained(folder)
    VitPoseImageProcessor(size={"height": 64, "width": 48}).save_pretrained(folder)
    return folder


# ---- image + text -------------------------------------------------------------------------------


def build_vitpose_plus(folder: Path) -> Path:
    return build_vitpose(folder, experts=2)


def build_blip_captioner(folder: Path) -> Path:
    from transformers import BlipConfig, BlipForConditionalGeneration, BlipImageProcessor, BlipProcessor

    tok = _bert_tokenizer()
    text = {
        "vocab_size": len(tok),
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 37,
        "max_position_embeddings": 64,
        "bos_token_id": tok.cls_token_id,
        "pad_token_id": tok.pad_token_id,
        "sep_token_id": tok.sep_token_id,
        "eos_token_id": tok.sep_token_id,
    }
    vision = {
        "image_size": SIZE,
        "patch_size": 8,
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 37,
    }
    model = BlipForConditionalGeneration(
        BlipConfig(text_config=text, vision_config=vision, projection_dim=16)
    )
    model.generation_config.max_new_tokens = 6
    model.save_pretrained(folder)
    processor = BlipProcessor(
        image_processor=BlipImageProcessor(size={"height": SIZE, "width": SIZE}), tokenizer=tok
    )
    processor.save_pretrained(folder)
    return folder


def build_blip_vqa(folder: Path) -> Path:
    """BLIP's question-answering head (an answer decoder), with the captioner's processor."""
    from transformers import BlipForQuestionAnswering

    build_blip_captioner(folder)
    BlipForQuestionAnswering.from_pretrained(folder).save_pretrained(folder)  # same config, VQA head
    return folder


def build_vit_gpt2(folder: Path) -> Path:
    """A VisionEncoderDecoder captioner (ViT encoder + GPT-2 decoder): an image processor and a
    tokenizer, no combined processor, as in nlpconnect/vit-gpt2-image-captioning."""
    from transformers import (
        GPT2Config,
        VisionEncoderDecoderConfig,
        VisionEncoderDecoderModel,
        ViTConfig,
        ViTImageProcessor,
    )

    # Start and end tokens differ here (GPT-2 uses one for both) so a random decoder rarely stops at once.
    tok = word_tokenizer(
        specials=["<|endoftext|>", "</s>"],
        max_len=64,
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="</s>",
        pad_token="<|endoftext|>",
    )
    encoder = ViTConfig(
        image_size=SIZE,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
    )
    decoder = GPT2Config(
        vocab_size=len(tok),
        n_embd=32,
        n_layer=1,
        n_head=2,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=1,
        add_cross_attention=True,
        is_decoder=True,
    )
    config = VisionEncoderDecoderConfig(encoder=encoder.to_dict(), decoder=decoder.to_dict())
    config.pad_token_id, config.decoder_start_token_id, config.eos_token_id = 0, 0, 1
    model = VisionEncoderDecoderModel(config=config)
    model.generation_config.update(decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model.save_pretrained(folder)
    ViTImageProcessor(size={"height": SIZE, "width": SIZE}).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def build_llava(folder: Path) -> Path:
    """A LLaVA-style chat VLM: tiny CLIP vision tower + tiny Llama, with a chat template."""
    from transformers import CLIPImageProcessor, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tok = word_tokenizer(
        specials=["<unk>", "<s>", "</s>", "<image>"],
        extra=["USER:", "ASSISTANT:"],
        max_len=256,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<unk>",
    )
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})  # split out of "<image><image>..."
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] | upper }}: {% for c in m['content'] %}"
        "{% if c['type'] == 'image' %}<image> {% else %}{{ c['text'] }} {% endif %}{% endfor %}{% endfor %}"
        "{% if add_generation_prompt %}ASSISTANT: {% endif %}"
    )
    vision = {
        "model_type": "clip_vision_model",
        "image_size": SIZE,
        "patch_size": 8,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 37,
        "projection_dim": 16,
    }
    text = {
        "model_type": "llama",
        "vocab_size": len(tok),
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "intermediate_size": 37,
        "max_position_embeddings": 256,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
    }
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=3,
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )
    model = LlavaForConditionalGeneration(config)
    model.generation_config.max_new_tokens = 6
    model.generation_config.pad_token_id = 0
    model.save_pretrained(folder)
    # 16 patches + CLS, and the "default" strategy drops the CLS feature: 16 image tokens.
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": SIZE}, crop_size={"height": SIZE, "width": SIZE}
        ),
        tokenizer=tok,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=tok.chat_template,
    )
    processor.save_pretrained(folder)
    return folder


def build_vilt(folder: Path) -> Path:
    from transformers import ViltConfig, ViltForQuestionAnswering, ViltImageProcessor, ViltProcessor

    tok = _bert_tokenizer(max_len=40)
    config = ViltConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        image_size=SIZE,
        patch_size=8,
        max_position_embeddings=40,
        num_images=1,
        **_labels(7),
    )
    ViltForQuestionAnswering(config).save_pretrained(folder)
    processor = ViltProcessor(
        image_processor=ViltImageProcessor(size={"shortest_edge": SIZE}, size_divisor=8), tokenizer=tok
    )
    processor.save_pretrained(folder)
    return folder


def build_donut(folder: Path) -> Path:
    """An OCR-free document QA model: Donut-Swin encoder + MBart decoder, with Donut's task tokens."""
    from transformers import (
        DonutImageProcessor,
        DonutProcessor,
        DonutSwinConfig,
        MBartConfig,
        VisionEncoderDecoderConfig,
        VisionEncoderDecoderModel,
    )

    tok = word_tokenizer(
        specials=["<unk>", "<pad>", "<s>", "</s>"],
        max_len=64,
        extra=["<s_docvqa>", "<s_question>", "</s_question>", "<s_answer>", "</s_answer>"],
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
    )
    tok.add_special_tokens(
        {
            "additional_special_tokens": [
                "<s_docvqa>",
                "<s_question>",
                "</s_question>",
                "<s_answer>",
                "</s_answer>",
            ]
        }
    )
    encoder = DonutSwinConfig(
        image_size=SIZE, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=2
    )
    decoder = MBartConfig(
        vocab_size=len(tok),
        d_model=32,
        decoder_layers=1,
        decoder_attention_heads=2,
        decoder_ffn_dim=37,
        encoder_layers=1,
        encoder_attention_heads=2,
        encoder_ffn_dim=37,
        max_position_embeddings=64,
        is_decoder=True,
        add_cross_attention=True,
        pad_token_id=1,
        bos_token_id=2,
        eos_token_id=3,
        decoder_start_token_id=2,
    )
    config = VisionEncoderDecoderConfig(encoder=encoder.to_dict(), decoder=decoder.to_dict())
    config.pad_token_id, config.decoder_start_token_id, config.eos_token_id = 1, 2, 3
    VisionEncoderDecoderModel(config=config).save_pretrained(folder)
    image_processor = DonutImageProcessor(
        size={"height": SIZE, "width": SIZE}, do_align_long_axis=False, do_thumbnail=True, do_pad=True
    )
    DonutProcessor(image_processor=image_processor, tokenizer=tok).save_pretrained(folder)
    return folder


# ---- diffusers ----------------------------------------------------------------------------------


def _clip_text(max_len: int = 16):
    """A tiny CLIP text encoder and its tokenizer (end-of-text id kept off 2: see FINDINGS)."""
    from tokenizers import processors
    from transformers import CLIPTextConfig, CLIPTextModel

    tok = word_tokenizer(
        specials=["<unk>", "<pad>", "<bos>", "<eos>"],
        max_len=max_len,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
    )
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>", special_tokens=[("<bos>", 2), ("<eos>", 3)]
    )
    config = CLIPTextConfig(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=37,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=max_len,
        projection_dim=16,
        pad_token_id=1,
        bos_token_id=2,
        eos_token_id=3,
    )
    return CLIPTextModel(config), tok


def _unet_kwargs() -> dict:
    # 16x16 latents; the VAE below scales by 2, so pipelines default to 32x32 images.
    return dict(
        sample_size=16,
        block_out_channels=(8, 16),
        layers_per_block=1,
        norm_num_groups=4,
        cross_attention_dim=16,
        attention_head_dim=2,
    )


def _vae():
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        block_out_channels=(8, 16),
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        latent_channels=4,
        norm_num_groups=4,
        sample_size=SIZE,
        layers_per_block=1,
    )


def _sd_parts() -> dict:
    import torch
    from diffusers import DDIMScheduler, UNet2DConditionModel

    torch.manual_seed(0)
    text_encoder, tokenizer = _clip_text()
    unet = UNet2DConditionModel(
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        **_unet_kwargs(),
    )
    scheduler = DDIMScheduler(
        beta_schedule="scaled_linear",
        beta_start=0.00085,
        beta_end=0.012,
        steps_offset=1,
        clip_sample=False,
        set_alpha_to_one=False,
    )
    return dict(vae=_vae(), text_encoder=text_encoder, tokenizer=tokenizer, unet=unet, scheduler=scheduler)


def build_sd(folder: Path) -> Path:
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline(
        **_sd_parts(), safety_checker=None, feature_extractor=None, requires_safety_checker=False
    )
    pipe.save_pretrained(folder)
    return folder


def build_sd_image_variation(folder: Path) -> Path:
    """An image-conditioned SD (like lambdalabs/sd-image-variations-diffusers): a CLIP image encoder
    takes the text encoder's place, so the image is the whole condition."""
    from diffusers import StableDiffusionImageVariationPipeline
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModelWithProjection

    parts = _sd_parts()
    del parts["text_encoder"], parts["tokenizer"]
    encoder = CLIPVisionModelWithProjection(
        CLIPVisionConfig(
            image_size=SIZE,
            patch_size=8,
            hidden_size=16,
            intermediate_size=37,
            num_hidden_layers=1,
            num_attention_heads=2,
            projection_dim=16,
        )
    )
    features = CLIPImageProcessor(size={"shortest_edge": SIZE}, crop_size={"height": SIZE, "width": SIZE})
    StableDiffusionImageVariationPipeline(
        **parts,
        image_encoder=encoder,
        feature_extractor=features,
        safety_checker=None,
        requires_safety_checker=False,
    ).save_pretrained(folder)
    return folder


def _controlnet():
    from diffusers import ControlNetModel

    kw = _unet_kwargs()
    kw.pop("sample_size")
    return ControlNetModel(
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        conditioning_embedding_out_channels=(4, 8),
        **kw,
    )


def build_controlnet(folder: Path) -> Path:
    """A bare ControlNetModel, as hub ControlNet repos ship it (the base model comes separately)."""
    _controlnet().save_pretrained(folder)
    return folder


def build_sd_controlnet(folder: Path) -> Path:
    """A whole StableDiffusionControlNetPipeline saved in one folder."""
    from diffusers import StableDiffusionControlNetPipeline

    pipe = StableDiffusionControlNetPipeline(
        **_sd_parts(),
        controlnet=_controlnet(),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(folder)
    return folder


def build_text_to_video(folder: Path) -> Path:
    from diffusers import TextToVideoSDPipeline, UNet3DConditionModel

    parts = _sd_parts()
    parts["unet"] = UNet3DConditionModel(
        down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
        up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"),
        **_unet_kwargs(),
    )
    TextToVideoSDPipeline(**parts).save_pretrained(folder)
    return folder


# ---- session fixtures: each model is built once, on first use -----------------------------------


def _fixture(builder):
    @pytest.fixture(scope="session")
    def build(tiny_vision_root: Path) -> str:
        import torch

        torch.manual_seed(0)  # the same random weights on every run
        return str(builder(tiny_vision_root / builder.__name__.removeprefix("build_")))

    return build


@pytest.fixture(scope="session")
def tiny_vision_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tiny_vision")


tiny_vit = _fixture(build_vit_classifier)
tiny_detr = _fixture(build_detr)
tiny_segformer = _fixture(build_segformer)
tiny_dpt = _fixture(build_dpt)
tiny_vitpose = _fixture(build_vitpose)
tiny_vitpose_plus = _fixture(build_vitpose_plus)
tiny_blip = _fixture(build_blip_captioner)
tiny_blip_vqa = _fixture(build_blip_vqa)
tiny_vit_gpt2 = _fixture(build_vit_gpt2)
tiny_llava = _fixture(build_llava)
tiny_vilt = _fixture(build_vilt)
tiny_donut = _fixture(build_donut)
tiny_sd = _fixture(build_sd)
tiny_sd_image_variation = _fixture(build_sd_image_variation)
tiny_controlnet = _fixture(build_controlnet)
tiny_sd_controlnet = _fixture(build_sd_controlnet)
tiny_text_to_video = _fixture(build_text_to_video)


def draw_photo(path: Path, size: tuple[int, int] = (48, 40)) -> str:
    """A small test picture: sky, a red disc and a blue box, so edges and regions exist."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, (120, 170, 230))
    draw = ImageDraw.Draw(image)
    w, h = size
    draw.ellipse((w * 0.1, h * 0.2, w * 0.5, h * 0.7), fill=(220, 40, 40))
    draw.rectangle((w * 0.55, h * 0.4, w * 0.9, h * 0.95), fill=(30, 40, 160))
    image.save(path)
    return str(path)
