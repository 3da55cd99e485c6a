"""Diffusers zoo recipes, part b: checkpoint fields and pipeline inputs for the classes below."""
from __future__ import annotations

import numpy as np
import torch
from diffusers.models.embeddings import get_2d_rotary_pos_embed, get_2d_rotary_pos_embed_lumina

from . import Recipe

B = 2  # batch


def _ints(high, *shape):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(0))


def _mask(*lengths, total):
    """A padding mask: True for the first `length` tokens of each sample."""
    return torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]


def _masked_tokens(cfg, *shape):
    """VQ token ids with every other one replaced by the mask token (the last id), as aMUSEd masks them."""
    return torch.where(torch.arange(shape[-1]) % 2 == 0, cfg["vocab_size"] - 1, _ints(cfg["codebook_size"], *shape))


def _sana_wm_camera():
    """SANA-WM's camera inputs for a camera moving forward over 9 frames of 256x256 (the pipeline's
    prepare_camera with its VAE strides 8, 32, 32): a raymap per latent frame and the packed Plücker rays."""
    from diffusers.pipelines.sana_wm.cam_utils import prepare_camera

    c2w = np.tile(np.eye(4, dtype=np.float32), (9, 1, 1))
    c2w[:, 2, 3] = np.linspace(0, 1, 9)
    intrinsics = np.tile(np.array([200.0, 200.0, 128.0, 128.0], dtype=np.float32), (9, 1))
    cam = prepare_camera(c2w, intrinsics, target_size=(256, 256), vae_stride=(8, 32, 32))
    return {"camera_conditions": cam["raymap"].expand(B, -1, -1),
            "chunk_plucker": cam["chunk_plucker"].expand(B, -1, -1, -1, -1)}


def _hunyuan_dit_controlnet_inputs(cfg, randn):
    """What HunyuanDiTControlNetPipeline passes for 128x128 images (16x16 latents)."""
    from diffusers.pipelines.controlnet_hunyuandit.pipeline_hunyuandit_controlnet import (
        get_resize_crop_region_for_grid)

    grid = 16 // cfg["patch_size"]
    crops = get_resize_crop_region_for_grid((grid, grid), 512 // 8 // cfg["patch_size"])
    return {"hidden_states": randn(B, cfg["in_channels"], 16, 16), "timestep": torch.tensor([10.0, 500.0]),
            "encoder_hidden_states": randn(B, cfg["text_len"], cfg["cross_attention_dim"]),
            "text_embedding_mask": _mask(cfg["text_len"], 5, total=cfg["text_len"]).long(),
            "encoder_hidden_states_t5": randn(B, cfg["text_len_t5"], cfg["cross_attention_dim_t5"]),
            "text_embedding_mask_t5": _mask(cfg["text_len_t5"], 9, total=cfg["text_len_t5"]).long(),
            "image_meta_size": torch.tensor([[128.0, 128, 128, 128, 0, 0]] * B),
            "style": torch.zeros(B, dtype=torch.long),
            "image_rotary_emb": get_2d_rotary_pos_embed(cfg["attention_head_dim"], crops, (grid, grid),
                                                        output_type="pt"),
            "controlnet_cond": randn(B, cfg["in_channels"], 16, 16), "conditioning_scale": 1.0, "return_dict": False}


def _krea2_position_ids(text_len, grid):
    """Krea2Pipeline's (t, h, w) positions: text at the origin, then the image grid."""
    from diffusers import Krea2Pipeline

    return Krea2Pipeline.prepare_position_ids(text_len, grid, grid, "cpu")


def _ideogram4_ids(text_lengths, grid, max_text):
    """Ideogram4Pipeline's packed [left pad][text][image] layout: position ids, segment ids, token roles."""
    from diffusers import Ideogram4Pipeline

    ids = Ideogram4Pipeline._prepare_ids(text_lengths, grid, grid, max_text, "cpu")
    return dict(zip(("position_ids", "segment_ids", "indicator"), ids))


RECIPES = {
    "StableAudioProjectionModel": Recipe(
        why="text width, conditioning width and the seconds range are required (T5 width, DiT width, 0..512 s)",
        config={"text_encoder_dim": 48, "conditioning_dim": 32, "min_value": 0, "max_value": 512},
        inputs=lambda m, cfg, randn: {"text_hidden_states": randn(B, 8, 48),
                                      "start_seconds": torch.tensor([0.0, 5.0]),
                                      "end_seconds": torch.tensor([10.0, 47.0])}),
    "AutoencoderKLHunyuanImage": Recipe(
        why="every architecture field is required; the encoder's last width must be a multiple of 2 * latent",
        config={"in_channels": 3, "out_channels": 3, "latent_channels": 16, "block_out_channels": (32, 64),
                "layers_per_block": 1, "spatial_compression_ratio": 2, "sample_size": 32},
        inputs=lambda m, cfg, randn: {"sample": randn(B, 3, 16, 16), "return_dict": False}),
    "AutoencoderRAE": Recipe(
        why="the encoder's input must be a multiple of its 14-pixel patches and its width of its 64-wide heads",
        config={"encoder_hidden_size": 64, "encoder_input_size": 28},
        inputs=lambda m, cfg, randn: {"sample": randn(B, 3, 32, 32), "return_dict": False}),
    "AceStepConditionEncoder": Recipe(
        why="the forward needs lyrics, their mask and the packed reference-audio latents the pipeline builds",
        inputs=lambda m, cfg, randn: {
            "text_hidden_states": randn(B, 8, cfg["text_hidden_dim"]), "text_attention_mask": _mask(8, 6, total=8),
            "lyric_hidden_states": randn(B, 12, cfg["text_hidden_dim"]),
            "lyric_attention_mask": _mask(12, 9, total=12),
            "refer_audio_acoustic_hidden_states_packed": randn(B, 10, cfg["timbre_hidden_dim"]),
            "refer_audio_order_mask": torch.arange(B)}),
    "AutoencoderKLMagvit": Recipe(
        why="a causal video VAE: videos of 1 + 4k frames (B, C, F, H, W), not images",
        inputs=lambda m, cfg, randn: {"sample": randn(B, 3, 5, 32, 32), "return_dict": False}),
    "EasyAnimateTransformer3DModel": Recipe(
        why="in/out channels and patch size are left None (checkpoints: 16 latent channels, patches of 2)",
        config={"in_channels": 16, "out_channels": 16, "patch_size": 2},
        inputs=lambda m, cfg, randn: {"hidden_states": randn(B, 16, 2, 16, 16), "timestep": torch.tensor([10, 500]),
                                      "encoder_hidden_states": randn(B, 8, cfg["text_embed_dim"]),
                                      "return_dict": False}),
    "UniDiffuserModel": Recipe(
        why="latent channels, sample and patch size are left None (checkpoint: 4 channels, 64 pixels, patches of 2)",
        config={"in_channels": 4, "out_channels": 4, "sample_size": 16, "patch_size": 2, "num_text_tokens": 8,
                "use_data_type_embedding": True},
        inputs=lambda m, cfg, randn: {"latent_image_embeds": randn(B, 4, 16, 16),
                                      "image_embeds": randn(B, 1, cfg["clip_img_dim"]),
                                      "prompt_embeds": randn(B, 8, cfg["text_dim"]),
                                      "timestep_img": torch.tensor([10, 500]), "timestep_text": torch.tensor([0, 0]),
                                      "data_type": 1}),
    "LuminaNextDiT2DModel": Recipe(
        why="key/value heads are left None (checkpoint: 8); the pipeline passes rotary table, mask, attention kwargs",
        config={"num_kv_heads": 1},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, 4, 16, 16), "timestep": torch.tensor([0.3, 0.9]),
            "encoder_hidden_states": randn(B, 8, cfg["cross_attention_dim"]),
            "encoder_mask": _mask(8, 5, total=8).long(),
            "image_rotary_emb": get_2d_rotary_pos_embed_lumina(m.head_dim, 32, 32),
            "cross_attention_kwargs": {"base_sequence_length": (cfg["sample_size"] * 8 // 16) ** 2},
            "return_dict": False}),
    "ControlNetUnionModel": Recipe(
        why="an SDXL ControlNet: text_time embedding widths set, the control type embedding needs them",
        config={"down_block_types": ("DownBlock2D", "CrossAttnDownBlock2D"), "block_out_channels": (32, 64),
                "attention_head_dim": (2, 2), "norm_num_groups": 8, "use_linear_projection": True,
                "addition_embed_type": "text_time", "addition_time_embed_dim": 8,
                "projection_class_embeddings_input_dim": 32 + 6 * 8, "num_trans_channel": 32, "num_trans_head": 2,
                "num_proj_channel": 32},
        inputs=lambda m, cfg, randn: {
            "sample": randn(B, 4, 8, 8), "timestep": torch.tensor([10, 500]),
            "encoder_hidden_states": randn(B, 8, cfg["cross_attention_dim"]),
            "controlnet_cond": [randn(B, 3, 64, 64), randn(B, 3, 64, 64)],
            "control_type": torch.tensor([[1.0, 0, 0, 1, 0, 0]] * B), "control_type_idx": [0, 3],
            "conditioning_scale": 1.0,
            "added_cond_kwargs": {"text_embeds": randn(B, 32),
                                  "time_ids": torch.tensor([[64.0, 64, 0, 0, 64, 64]] * B)},
            "return_dict": False}),
    "HiDreamImageTransformer2DModel": Recipe(
        why="patch size, output channels, caption widths and the Llama layers read are left None; rotary over 3 axes",
        config={"patch_size": 2, "in_channels": 16, "out_channels": 16, "caption_channels": [32, 48],
                "axes_dims_rope": (16, 8, 8), "llama_layers": [1, 3]},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, 16, 16, 16), "timesteps": torch.tensor([10, 500]),
            "encoder_hidden_states_t5": randn(B, 8, 32), "encoder_hidden_states_llama3": randn(4, B, 8, 48),
            "pooled_embeds": randn(B, cfg["text_emb_dim"]), "return_dict": False}),
    "ZImageTransformer2DModel": Recipe(
        why="the rotary axes must sum to the head width; the pipeline passes per-sample lists of latents and captions",
        config={"axes_dims": [4, 6, 6]},
        inputs=lambda m, cfg, randn: {
            "x": [randn(cfg["in_channels"], 1, 16, 16) for _ in range(B)], "t": torch.tensor([0.99, 0.5]),
            "cap_feats": [randn(8, cfg["cap_feat_dim"]), randn(5, cfg["cap_feat_dim"])], "return_dict": False}),
    "PRXTransformer2DModel": Recipe(
        why="the rotary axes are left None (checkpoint: two axes summing to the head width)",
        config={"axes_dim": [8, 8]},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, cfg["in_channels"], 16, 16), "timestep": torch.tensor([0.9, 0.3]),
            "encoder_hidden_states": randn(B, 8, cfg["context_in_dim"]), "attention_mask": _mask(8, 5, total=8),
            "return_dict": False}),
    "Krea2Transformer2DModel": Recipe(
        why="the pipeline passes packed latents, a stack of text-encoder layers and the joint (t, h, w) positions",
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, 64, cfg["in_channels"]),
            "encoder_hidden_states": randn(B, 8, cfg["num_text_layers"], cfg["text_hidden_dim"]),
            "timestep": torch.tensor([0.9, 0.3]), "position_ids": _krea2_position_ids(8, 8),
            "encoder_attention_mask": _mask(8, 5, total=8), "return_dict": False}),
    "Lumina2Transformer2DModel": Recipe(
        why="the three rotary axes must sum to the shrunk head width (checkpoint: 32 + 32 + 32 = 96)",
        config={"axes_dim_rope": (4, 6, 6)},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, cfg["in_channels"], 16, 16), "timestep": torch.tensor([0.1, 0.7]),
            "encoder_hidden_states": randn(B, 8, cfg["cap_feat_dim"]), "encoder_attention_mask": _mask(8, 5, total=8),
            "return_dict": False}),
    "UVit2DModel": Recipe(
        why="the micro-conditioning embedding must be 5 conditions times their encoding width",
        config={"micro_cond_embed_dim": 5 * 32, "micro_cond_encode_dim": 32},
        inputs=lambda m, cfg, randn: {
            "input_ids": _masked_tokens(cfg, B, 16, 16),
            "encoder_hidden_states": randn(B, 8, cfg["encoder_hidden_size"]),
            "pooled_text_emb": randn(B, cfg["cond_embed_dim"]),
            "micro_conds": torch.tensor([[512.0, 512, 0, 0, 6]] * B)}),
    "ErnieImageTransformer2DModel": Recipe(
        why="rotary axes must sum to the shrunk head width; the pipeline passes padded text and its lengths",
        config={"rope_axes_dim": (4, 6, 6)},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, cfg["in_channels"], 16, 16), "timestep": torch.tensor([900.0, 300.0]),
            "text_bth": randn(B, 8, cfg["text_in_dim"]), "text_lens": torch.tensor([8, 5]), "return_dict": False}),
    "QwenImage21Transformer2DModel": Recipe(
        why="the pipeline passes packed 2x2 latents, their grid and the joint mask of text and image slots",
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, 64, cfg["in_channels"]), "timestep": torch.tensor([0.9, 0.3]),
            "encoder_hidden_states": randn(B, 8, cfg["context_in_dim"]),
            "encoder_hidden_states_mask": _mask(8, 5, total=8),
            "img_shapes": [[(1, 8, 8)]] * B,
            "img_mask": torch.cat([torch.zeros(B, 8, dtype=torch.bool), torch.ones(B, 64 // 4, dtype=torch.bool)], 1),
            "return_dict": False}),
    "JoyImageEditPlusTransformer3DModel": Recipe(
        why="out channels left None, rotary axes must fit the head; inputs: (1, 2, 2) patches of target + reference",
        config={"out_channels": 16, "rope_dim_list": [4, 6, 6]},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, 2 * 16, cfg["in_channels"], 1, 2, 2), "timestep": torch.tensor([900.0, 300.0]),
            "encoder_hidden_states": randn(B, 8, cfg["text_dim"]), "encoder_hidden_states_mask": _mask(8, 5, total=8),
            "shape_list": [[(1, 4, 4), (1, 4, 4)]] * B, "return_dict": False}),
    "SanaWMTransformer3DModel": Recipe(
        why="Plücker rays are 6 x the VAE's 8-frame stride; the pipeline passes text mask, image size and camera",
        config={"chunk_plucker_channels": 6 * 8},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, cfg["in_channels"], 2, 8, 8),
            "timestep": torch.tensor([[[0.0, 900.0]], [[0.0, 300.0]]]),  # the first (conditioning) frame at 0
            "encoder_hidden_states": randn(B, 1, 8, cfg["caption_channels"]), "mask": _mask(8, 5, total=8).long(),
            "data_info": {"img_hw": torch.tensor([[256.0, 256.0]])}, **_sana_wm_camera(), "return_dict": False}),
    "HunyuanDiT2DMultiControlNetModel": Recipe(
        why="a ControlNet of a 4-layer DiT has one block (layers // 2 - 1); the pipeline passes rotary table and masks",
        config={"transformer_num_layers": 4},
        inputs=lambda m, cfg, randn: _hunyuan_dit_controlnet_inputs(cfg, randn)),
    "Kandinsky6SRTransformer3DModel": Recipe(
        why="inputs are channels-last tiles of noisy latent, anchor latent and anchor mask on an 8x8-divisible grid",
        inputs=lambda m, cfg, randn: {
            "hidden_states": torch.cat([randn(B, 1, 8, 8, cfg["in_visual_dim"]),  # noisy latent
                                        randn(B, 1, 8, 8, cfg["in_visual_dim"]),  # anchor latent
                                        torch.ones(B, 1, 8, 8, 1)], dim=-1),  # anchor mask
            "timestep": torch.tensor([900.0, 300.0]), "return_dict": False}),
    "AutoencoderKLHunyuanImageRefiner": Recipe(
        why="a causal video VAE whose downsamples widen the channels (shrunk equal widths break them); 1 + 4k frames",
        config={"block_out_channels": (32, 64, 64), "spatial_compression_ratio": 4, "temporal_compression_ratio": 4},
        inputs=lambda m, cfg, randn: {"sample": randn(B, 3, 5, 16, 16), "return_dict": False}),
    "AutoencoderKLMiniMaxH3": Recipe(
        why="a video VAE encoding 17-frame clips: videos of 17n + 5 frames (B, C, F, H, W), not images",
        inputs=lambda m, cfg, randn: {"sample": randn(B, 3, 17 + 5, 32, 32), "return_dict": False}),
    "AutoencoderVidTok": Recipe(
        why="the base width `ch` is no shrunk key (128M parameters); causal video VAE: 1 + 4k frames, posterior mode",
        config={"ch": 32},
        inputs=lambda m, cfg, randn: {"sample": randn(B, 3, 5, 32, 32), "sample_posterior": False,
                                      "return_dict": False}),
    "MiniMaxMusic3Transformer1DModel": Recipe(
        why="the partial rotary width must fit the shrunk head (checkpoint: 32 of 64); latents (B, C, T)",
        config={"rotary_dim": 8},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, cfg["in_channels"], 16), "timestep": torch.tensor([0.3, 0.8]),
            "encoder_hidden_states": randn(B, 16, cfg["condition_dim"]), "return_dict": False}),
    "StableAudio3DiTModel": Recipe(
        why="the forward needs the global (duration) conditioning; the pipeline also appends it to the text tokens",
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, cfg["io_channels"], 16), "timestep": torch.tensor([0.3, 0.8]),
            "encoder_hidden_states": randn(B, 8 + 1, cfg["cond_token_dim"]),
            "encoder_attention_mask": torch.cat([_mask(8, 5, total=8), torch.ones(B, 1, dtype=torch.bool)], 1),
            "global_hidden_states": randn(B, cfg["global_cond_dim"]), "return_dict": False}),
    "Ideogram4Transformer2DModel": Recipe(
        why="the interleaved M-RoPE sections must fit the shrunk head; the pipeline packs [pad][text][image] with ids",
        config={"mrope_section": (4, 2, 2)},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, 8 + 64, cfg["in_channels"]), "timestep": torch.tensor([0.3, 0.8]),
            "encoder_hidden_states": randn(B, 8 + 64, cfg["llm_features_dim"]),
            **_ideogram4_ids([8, 5], 8, max_text=8),
            "return_dict": False}),
    "AnimaTextConditioner": Recipe(
        why="the forward needs the T5 token ids used as queries next to the Qwen3 hidden states, with both masks",
        inputs=lambda m, cfg, randn: {
            "source_hidden_states": randn(B, 8, cfg["source_dim"]), "source_attention_mask": _mask(8, 5, total=8),
            "target_input_ids": _ints(cfg["target_vocab_size"], B, 8), "target_attention_mask": _mask(8, 6, total=8)}),
    "MiniMaxMusic3RVQDepthDecoder": Recipe(
        why="the depth sequence is the global hidden state then one embedding per codebook: (B, 1 + codebooks, width)",
        inputs=lambda m, cfg, randn: {"inputs_embeds": randn(B, 1 + cfg["num_codebooks"], cfg["hidden_size"])}),
}
