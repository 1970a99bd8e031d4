// Images for a vision program (SmolVLM: one 512x512 RGB global image). The page decodes and
// resizes (createImageBitmap + OffscreenCanvas, `imagePixels`); the worker normalises in JS
// (`pixelValues`): pixel_values = (x/255 - 0.5)/0.5, NCHW float32 (py/webpte/host/image.py).
// Browsers resize with their own filter, so a picture not already at the model's size gives
// pixel values close to, not equal to, Pillow's Lanczos resize of the native host.

import { InputError } from './errors.js';

/**
 * RGBA bytes (ImageData.data) of `height` x `width` -> float32 [1, 3, height, width].
 * @param {Uint8Array | Uint8ClampedArray} rgba @param {number} height @param {number} width
 * @returns {Float32Array}
 */
export function pixelValues(rgba, height, width) {
  const n = height * width;
  if (rgba.length !== n * 4) throw new InputError(`image data has ${rgba.length} bytes, ${height}x${width} RGBA needs ${n * 4}`);
  const out = new Float32Array(3 * n);
  for (let i = 0; i < n; i++) {
    for (let c = 0; c < 3; c++) out[c * n + i] = (rgba[i * 4 + c] / 255 - 0.5) / 0.5;
  }
  return out;
}

/**
 * In the page: any image the browser can draw (Blob/File, ImageBitmap, ImageData, <img>,
 * <canvas>, VideoFrame, ...) -> its RGBA pixels at `width` x `height`. An ImageData of that size
 * is taken as is (exact pixels).
 * @param {ImageBitmapSource} image @param {number} height @param {number} width
 * @returns {Promise<{data: Uint8ClampedArray, height: number, width: number}>}
 * @throws {InputError}
 */
export async function imagePixels(image, height, width) {
  if (typeof ImageData !== 'undefined' && image instanceof ImageData && image.width === width && image.height === height) {
    return { data: image.data, height, width };
  }
  if (typeof createImageBitmap === 'undefined' || typeof OffscreenCanvas === 'undefined') {
    throw new InputError('this browser cannot decode images here (no createImageBitmap/OffscreenCanvas)');
  }
  let bitmap;
  try {
    bitmap = await createImageBitmap(image, { colorSpaceConversion: 'none', premultiplyAlpha: 'none' });
  } catch (err) {
    throw new InputError(`the image could not be decoded (${err.message}); pass a JPEG/PNG/WebP File or Blob, an <img>, a canvas, an ImageBitmap or ImageData`);
  }
  const canvas = new OffscreenCanvas(width, height);
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  ctx.imageSmoothingEnabled = true;
  ctx.imageSmoothingQuality = 'high';
  ctx.drawImage(bitmap, 0, 0, width, height);
  bitmap.close();
  return { data: ctx.getImageData(0, 0, width, height).data, height, width };
}
