"""Recipes of the diffusers zoo, part C (see __init__.py)."""
from __future__ import annotations

import torch

from . import Recipe


def _grid_ids(rows, cols, axes=3):
    """Flux-style position ids of a rows x cols latent grid: (row, column) in the last two axes."""
    ids = torch.zeros(rows, cols, axes)
    ids[..., -2] = torch.arange(rows)[:, None]
    ids[..., -1] = torch.arange(cols)[None, :]
    return ids.reshape(-1, axes)


def _text_mask():
    return torch.tensor([[1] * 8, [1] * 6 + [0] * 2])  # the second prompt padded by two tokens


def _anyflow(model, cfg, randn):
    # (batch, frames, channels, height, width) latents; per-frame flow-map timesteps t and r
    return dict(hidden_states=randn(2, 2, 16, 8, 8), timestep=torch.tensor([[900.0, 900.0], [400.0, 400.0]]),
                r_timestep=torch.tensor([[600.0, 600.0], [100.0, 100.0]]), encoder_hidden_states=randn(2, 8, 32),
                return_dict=False)


def _minimax_audio(model, cfg, randn):
    return dict(sample=randn(2, 1, 256), return_dict=False)  # mono waveform, 32 hops of 8 samples


def _bria_fibo(model, cfg, randn):
    # packed 4x4 latents; one text-encoder layer per block (double and single)
    layers = cfg["num_layers"] + cfg["num_single_layers"]
    return dict(hidden_states=randn(2, 16, cfg["in_channels"]), timestep=torch.tensor([900.0, 300.0]),
                encoder_hidden_states=randn(2, 8, cfg["joint_attention_dim"]),
                text_encoder_layers=[randn(2, 8, cfg["text_encoder_dim"]) for _ in range(layers)],
                txt_ids=torch.zeros(8, 3), img_ids=_grid_ids(4, 4), return_dict=False)


def _bria_fibo2(model, cfg, randn):
    # text features: the Perceiver's bundle, then one per injection layer; timestep in [0, 1]
    bundles = 1 + len(cfg["injection_layer_ids"])
    return dict(hidden_states=randn(2, cfg["in_channels"], 8, 8), timestep=torch.tensor([0.9, 0.3]),
                encoder_hidden_states=randn(2, bundles, 8, cfg["cap_feat_dim"]), return_dict=False)


def _helios(model, cfg, randn):
    # a chunk of 2 latent frames after the history (long 4, mid 2, short = first frame + 1), as the pipeline
    # splits arange(1 + 4 + 2 + 1 + 2) with keep_first_frame
    return dict(hidden_states=randn(2, 16, 2, 8, 8), timestep=torch.tensor([900, 300]),
                encoder_hidden_states=randn(2, 8, 32),
                indices_latents_history_long=torch.arange(1, 5)[None],
                indices_latents_history_mid=torch.arange(5, 7)[None],
                indices_latents_history_short=torch.tensor([[0, 7]]),
                indices_hidden_states=torch.arange(8, 10)[None],
                latents_history_long=randn(2, 16, 4, 8, 8), latents_history_mid=randn(2, 16, 2, 8, 8),
                latents_history_short=randn(2, 16, 2, 8, 8), return_dict=False)


def _hunyuan_video15(model, cfg, randn):
    # latents, conditioning latents and their mask concatenated (i2v: image latents and SigLIP tokens);
    # LLM and ByT5 prompt embeddings with their masks
    return dict(hidden_states=randn(2, cfg["in_channels"], 2, 8, 8), timestep=torch.tensor([900.0, 300.0]),
                encoder_hidden_states=randn(2, 8, cfg["text_embed_dim"]), encoder_attention_mask=_text_mask(),
                encoder_hidden_states_2=randn(2, 8, cfg["text_embed_2_dim"]), encoder_attention_mask_2=_text_mask(),
                image_embeds=randn(2, 4, cfg["image_embed_dim"]), return_dict=False)


def _kandinsky3(model, cfg, randn):
    return dict(sample=randn(2, 4, 16, 16), timestep=torch.tensor([900, 300]),
                encoder_hidden_states=randn(2, 8, cfg["encoder_hid_dim"]), encoder_attention_mask=_text_mask(),
                return_dict=False)


def _ltx2(model, cfg, randn):
    # packed video latents (2 frames of 4x4) and audio latents (8 frames), one prompt embedding per modality;
    # the timestep is already scaled by 1000 and doubles as sigma (LTX-2.3), as the pipeline passes it
    t = torch.tensor([900.0, 300.0])
    return dict(hidden_states=randn(2, 32, cfg["in_channels"]),
                audio_hidden_states=randn(2, 8, cfg["audio_in_channels"]),
                encoder_hidden_states=randn(2, 8, cfg["caption_channels"]),
                audio_encoder_hidden_states=randn(2, 8, cfg["caption_channels"]), timestep=t, sigma=t,
                encoder_attention_mask=_text_mask(), audio_encoder_attention_mask=_text_mask(),
                num_frames=2, height=4, width=4, fps=24.0, audio_num_frames=8, return_dict=False)


def _mmaudio_vae(model, cfg, randn):
    return dict(sample=randn(2, 8192) * 0.3, return_dict=False)  # mono waveforms in [-1, 1], 16 mel frames


def _sparse_controlnet(model, cfg, randn):
    # (batch, channels, frames, h, w) latents; the first of two frames conditioned (latent conditioning and
    # its frame mask, as prepare_sparse_control_conditioning builds them); prompt embeddings repeated per frame
    cond = torch.cat([randn(2, 4, 1, 16, 16), torch.zeros(2, 4, 1, 16, 16)], dim=2)
    mask = torch.tensor([1.0, 0.0]).view(1, 1, 2, 1, 1).expand(2, 1, 2, 16, 16)
    return dict(sample=randn(2, 4, 2, 16, 16), timestep=torch.tensor([900, 300]),
                encoder_hidden_states=randn(2, 8, cfg["cross_attention_dim"]).repeat_interleave(2, dim=0),
                controlnet_cond=cond, conditioning_mask=mask, return_dict=False)


def _dit(model, cfg, randn):
    return dict(hidden_states=randn(2, 4, 16, 16), timestep=torch.tensor([900, 300]),
                class_labels=torch.tensor([1, 3]), return_dict=False)


def _hunyuan_video15_vae(model, cfg, randn):
    # one video of 1 + 4 frames (the causal temporal compression), 32x32 pixels: 2x2x2 latents
    return dict(sample=randn(1, 3, 5, 32, 32), return_dict=False)


def _qwen_image21_vae(model, cfg, randn):
    return dict(sample=randn(2, 4, 1, 32, 32), return_dict=False)  # RGBA images as one-frame videos


def _wan_animate(model, cfg, randn):
    # noisy latents + reference latents + mask (2 * 16 + 4 channels) over 1 reference + 2 frames, pose
    # latents of the 2 frames, CLIP features of the reference image, a face video of 5 frames at the motion
    # encoder's resolution
    size = cfg["motion_encoder_size"]
    return dict(hidden_states=randn(2, cfg["in_channels"], 3, 8, 8), timestep=torch.tensor([900, 300]),
                encoder_hidden_states=randn(2, 8, cfg["text_dim"]),
                encoder_hidden_states_image=randn(2, 4, cfg["image_dim"]),
                pose_hidden_states=randn(2, cfg["latent_channels"], 2, 8, 8),
                face_pixel_values=randn(2, 3, 5, size, size),
                return_dict=False)


def _ace_step_tokenizer(model, cfg, randn):
    # acoustic latents grouped in pooling windows, as tokenize() reshapes them
    return dict(hidden_states=randn(2, 4, cfg["pool_window_size"], cfg["audio_acoustic_hidden_dim"]))


def _joyimage_edit(model, cfg, randn):
    # edit: the reference image and the target as two items of one frame each (batch, items, c, t, h, w)
    return dict(hidden_states=randn(2, 2, cfg["in_channels"], 1, 8, 8), timestep=torch.tensor([900.0, 300.0]),
                encoder_hidden_states=randn(2, 8, cfg["text_dim"]), return_dict=False)


def _kandinsky6(model, cfg, randn):
    # channels-last video latents (batch, frames, h, w, c) with the zero conditioning latent and mask channels
    # of text-to-video, audio latents, Qwen prompt embeddings, CLIP pooled embedding
    c = cfg["in_visual_dim"]
    video = torch.cat([randn(2, 2, 8, 8, c), torch.zeros(2, 2, 8, 8, c + 1)], dim=-1)
    return dict(hidden_states=video, audio_hidden_states=randn(2, 6, cfg["in_audio_dim"]),
                encoder_hidden_states=randn(2, 8, cfg["in_text_dim"]), pooled_projections=randn(2, cfg["in_text_dim2"]),
                timestep=torch.tensor([900.0, 300.0]), encoder_attention_mask=_text_mask().bool(), return_dict=False)


def _framepack(model, cfg, randn):
    # vanilla sampling with history sizes (4, 2, 1) and a window of 2 frames: indices split from
    # arange(1 + 4 + 2 + 1 + 2) as the pipeline does; clean latents = the image latent + the 1x history
    return dict(hidden_states=randn(2, 16, 2, 8, 8), timestep=torch.tensor([900.0, 300.0]),
                encoder_hidden_states=randn(2, 8, cfg["text_embed_dim"]), encoder_attention_mask=_text_mask(),
                pooled_projections=randn(2, cfg["pooled_projection_dim"]),
                image_embeds=randn(2, 4, cfg["image_proj_dim"]),
                indices_latents=torch.arange(8, 10), guidance=torch.tensor([10000.0, 10000.0]),
                latents_clean=randn(2, 16, 2, 8, 8), indices_latents_clean=torch.tensor([0, 7]),
                latents_history_2x=randn(2, 16, 2, 8, 8), indices_latents_history_2x=torch.arange(5, 7),
                latents_history_4x=randn(2, 16, 4, 8, 8), indices_latents_history_4x=torch.arange(1, 5),
                return_dict=False)


def _stable_audio(model, cfg, randn):
    # 16 latent frames; text + duration embeddings for cross-attention, the duration embeddings (start and
    # end seconds side by side) as the global state; the pipeline's rotary table over latents + global token
    from diffusers.models.embeddings import get_1d_rotary_pos_embed

    rotary = get_1d_rotary_pos_embed(cfg["attention_head_dim"] // 2, 16 + 1, use_real=True,
                                     repeat_interleave_real=False)
    return dict(hidden_states=randn(2, cfg["in_channels"], 16), timestep=torch.tensor([0.9, 0.3]),
                encoder_hidden_states=randn(2, 10, cfg["cross_attention_input_dim"]),
                global_hidden_states=randn(2, 1, cfg["global_states_input_dim"]), rotary_embedding=rotary,
                return_dict=False)


def _unidiffuser_text_decoder(model, cfg, randn):
    # caption tokens after a prefix of CLIP text embeddings (the training forward)
    ids = torch.randint(0, cfg["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(0))
    return dict(input_ids=ids, prefix_embeds=randn(2, cfg["prefix_length"], cfg["prefix_inner_dim"]))


def _mmaudio_vocoder(model, cfg, randn):
    return dict(mel=randn(2, cfg["num_mels"], 4), return_dict=False)  # 4 mel frames -> 4 * 512 samples


def _kvae_video(model, cfg, randn):
    return dict(sample=randn(2, 3, 5, 32, 32), return_dict=False)  # 1 + 4 frames (temporal compression 4)


def _flux_multi_controlnet(model, cfg, randn):
    # packed 4x4 latents and VAE-encoded, packed control images (listed per net by the harness); non-union
    # nets get mode -1 as the pipeline sets it; timestep / 1000 as the pipeline passes it
    return dict(hidden_states=randn(2, 16, cfg["in_channels"]), controlnet_cond=randn(2, 16, cfg["in_channels"]),
                controlnet_mode=torch.tensor([-1, -1]), encoder_hidden_states=randn(2, 8, cfg["joint_attention_dim"]),
                pooled_projections=randn(2, cfg["pooled_projection_dim"]), timestep=torch.tensor([0.9, 0.3]),
                img_ids=_grid_ids(4, 4), txt_ids=torch.zeros(8, 3), return_dict=False)


def _cosmos3_audio(model, cfg, randn):
    return dict(sample=randn(2, 2, 3840) * 0.3, return_dict=False)  # stereo waveforms, 2 hops of 1920 samples


RECIPES = {
    "AnyFlowTransformer3DModel": Recipe(
        "latents are (batch, frames, channels, h, w) and the timesteps t, r are per frame (batch, frames)",
        inputs=_anyflow),
    "AutoencoderKLMiniMaxH3Audio": Recipe(
        "the decoder halves its width per upsampling: a 32-wide decoder over 7 rates reaches 0 channels; "
        "two encoder/decoder rates (hop 8) fit the shrunk width",
        config=dict(encoder_rates=(2, 4), decoder_rates=(4, 2), decoder_kernel_sizes=(8, 4), latent_dim=64),
        inputs=_minimax_audio),
    "BriaFiboTransformer2DModel": Recipe(
        "needs one text-encoder hidden state per block (text_encoder_layers) and 3-axis position ids",
        inputs=_bria_fibo),
    "BriaFibo2Transformer2DModel": Recipe(
        "rotary axes must sum to the shrunk head size (16); text features come in bundles (Perceiver + one per "
        "injection layer), the injection layer ids must name a layer of the shrunk stack",
        config=dict(axes_dims=(4, 6, 6), injection_layer_ids=(0,)), inputs=_bria_fibo2),
    "HeliosTransformer3DModel": Recipe(
        "rotary axes must sum to the shrunk head size (16); the pipeline passes short/mid/long history latents "
        "with their frame indices",
        config=dict(rope_dim=(4, 6, 6)), inputs=_helios),
    "HunyuanVideo15Transformer3DModel": Recipe(
        "the pipeline concatenates latents, conditioning latents and mask (2 * 32 + 1 channels) and always passes "
        "the ByT5 prompt and the image tokens; the image width shrunk with the others",
        config=dict(in_channels=65, image_embed_dim=32), inputs=_hunyuan_video15),
    "Kandinsky3UNet": Recipe(
        "an up block with one layer never reaches its output width: two layers per block (checkpoints have 3)",
        config=dict(layers_per_block=2), inputs=_kandinsky3),
    "LTX2VideoTransformer3DModel": Recipe(
        "audio and video streams: audio cross-attention width must equal the audio inner width (2 heads of 16)",
        config=dict(audio_attention_head_dim=16), inputs=_ltx2),
    "MMAudioVAE": Recipe("the input is a mono waveform (batch, samples), not an image", inputs=_mmaudio_vae),
    "SparseControlNetModel": Recipe(
        "video latents, conditioning and mask are (batch, channels, frames, h, w); prompts repeat per frame",
        inputs=_sparse_controlnet),
    "Transformer2DModel": Recipe(
        "patched inputs need an adaptive norm: the DiT checkpoint config (ada_norm_zero, class labels, learned "
        "sigma)",
        config=dict(norm_type="ada_norm_zero", num_embeds_ada_norm=1000, out_channels=8,
                    activation_fn="gelu-approximate", attention_bias=True, norm_elementwise_affine=False),
        inputs=_dit),
    "AutoencoderKLHunyuanVideo15": Recipe(
        "the encoder averages its last width over 2 * latent_channels groups: widths grow as in the checkpoint "
        "(1:2:4:8:8); one video per batch (the causal attention mask only broadcasts over a batch of one)",
        config=dict(block_out_channels=(8, 16, 32, 64, 64)), inputs=_hunyuan_video15_vae),
    "AutoencoderKLQwenImage21": Recipe(
        "patch_size is None in the class (the generic rule sets 2); inputs are RGBA frames",
        config=dict(patch_size=None), inputs=_qwen_image21_vae),
    "WanAnimateTransformer3DModel": Recipe(
        "a face adapter every 5 blocks leaves none in a 1-block stack (every block); motion-encoder widths "
        "shrunk to the 32-pixel face size; the pipeline passes pose latents, face video and CLIP features",
        config=dict(inject_face_latents_blocks=1,
                    motion_encoder_channel_sizes={"4": 32, "8": 32, "16": 32, "32": 32}),
        inputs=_wan_animate),
    "AceStepAudioTokenizer": Recipe(
        "the input is acoustic latents in pooling windows (batch, patches, window, acoustic width)",
        inputs=_ace_step_tokenizer),
    "JoyImageEditTransformer3DModel": Recipe(
        "rotary axes must sum to the shrunk head size (16); the edit pipeline passes (image, target) items",
        config=dict(rope_dim_list=[4, 6, 6]), inputs=_joyimage_edit),
    "Kandinsky6Transformer3DModel": Recipe(
        "channels-last video latents with conditioning channels (2 * 16 + 1), audio latents and a pooled "
        "embedding of the CLIP width",
        inputs=_kandinsky6),
    "HunyuanVideoFramepackTransformer3DModel": Recipe(
        "the FramePack checkpoint's image projection and clean-latent embedder; the pipeline passes clean and "
        "2x/4x history latents with their frame indices",
        config=dict(has_image_proj=True, image_proj_dim=32, has_clean_x_embedder=True), inputs=_framepack),
    "StableAudioDiTModel": Recipe(
        "the pipeline passes the global (duration) state and a precomputed rotary table",
        inputs=_stable_audio),
    "UniDiffuserTextDecoder": Recipe(
        "prefix_length and prefix_inner_dim are required (UniDiffuser: 77 CLIP tokens through a 64-wide "
        "bottleneck); the GPT-2 widths (n_embd, n_layer, n_head) escape the generic shrink",
        config=dict(prefix_length=77, prefix_inner_dim=32, prefix_hidden_dim=64, n_embd=32, n_layer=1, n_head=2),
        inputs=_unidiffuser_text_decoder),
    "MMAudioVocoder": Recipe(
        "upsample_initial_channel escapes the generic shrink (122M parameters): 128 halves to 2 over 6 upsamplings",
        config=dict(upsample_initial_channel=128), inputs=_mmaudio_vocoder),
    "AutoencoderKLKVAEVideo": Recipe(
        "ch escapes the generic shrink (467M parameters); its group norms of 32 need ch >= 32, so the widths "
        "grow more slowly (1, 2, 2, 4) to stay under the cap",
        config=dict(ch=32, ch_mult=(1, 2, 2, 4)), inputs=_kvae_video),
    "FluxMultiControlNetModel": Recipe(
        "each net needs a mode tensor (-1 for non-union nets, as the pipeline sets), packed control latents "
        "and 3-axis position ids",
        inputs=_flux_multi_controlnet),
    "Cosmos3AVAEAudioTokenizer": Recipe(
        "the encoder's latent width is mean + log-variance of the decoder's input width (2 * 32); the input is "
        "a stereo waveform (batch, 2, samples)",
        config=dict(enc_latent_dim=64), inputs=_cosmos3_audio),
}
