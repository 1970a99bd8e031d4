/**
 * RGBA bytes (ImageData.data) of `height` x `width` -> float32 [1, 3, height, width].
 * @param {Uint8Array | Uint8ClampedArray} rgba @param {number} height @param {number} width
 * @returns {Float32Array}
 */
export function pixelValues(rgba: Uint8Array | Uint8ClampedArray, height: number, width: number): Float32Array;
/**
 * In the page: any image the browser can draw (Blob/File, ImageBitmap, ImageData, <img>,
 * <canvas>, VideoFrame, ...) -> its RGBA pixels at `width` x `height`. An ImageData of that size
 * is taken as is (exact pixels).
 * @param {ImageBitmapSource} image @param {number} height @param {number} width
 * @returns {Promise<{data: Uint8ClampedArray, height: number, width: number}>}
 * @throws {InputError}
 */
export function imagePixels(image: ImageBitmapSource, height: number, width: number): Promise<{
    data: Uint8ClampedArray;
    height: number;
    width: number;
}>;
