// The picture that goes with the next question: picked, dropped, pasted or taken with the
// camera. Holds one Blob and shows its preview.

export class Picture {
  /**
   * @param {{drop: HTMLElement, input: HTMLInputElement, preview: HTMLImageElement,
   *   clear: HTMLButtonElement, cameraOpen: HTMLButtonElement, camera: HTMLElement,
   *   video: HTMLVideoElement, snap: HTMLButtonElement, cancel: HTMLButtonElement}} el
   * @param {(err: Error) => void} onError
   */
  constructor(el, onError) {
    this.el = el;
    this.onError = onError;
    /** @type {Blob | null} */
    this.blob = null;
    this.url = null;
    this.stream = null;
    el.input.addEventListener('change', () => {
      if (el.input.files[0]) this.set(el.input.files[0]);
      el.input.value = '';
    });
    el.drop.addEventListener('dragover', (e) => {
      e.preventDefault();
      el.drop.classList.add('over');
    });
    el.drop.addEventListener('dragleave', () => el.drop.classList.remove('over'));
    el.drop.addEventListener('drop', (e) => {
      e.preventDefault();
      el.drop.classList.remove('over');
      const file = [...e.dataTransfer.files].find((f) => f.type.startsWith('image/'));
      if (file) this.set(file);
      else onError(Object.assign(new Error('that is not a picture; drop a JPEG, PNG or WebP image'), { name: 'InputError' }));
    });
    el.clear.addEventListener('click', () => this.set(null));
    el.cameraOpen.hidden = !navigator.mediaDevices?.getUserMedia;
    el.cameraOpen.addEventListener('click', () => this.#openCamera());
    el.snap.addEventListener('click', () => this.#snap());
    el.cancel.addEventListener('click', () => this.#closeCamera());
  }

  /** Use `blob` (or nothing) with the next question. */
  set(blob) {
    if (this.url) URL.revokeObjectURL(this.url);
    this.blob = blob;
    this.url = blob ? URL.createObjectURL(blob) : null;
    this.el.preview.hidden = !blob;
    this.el.clear.hidden = !blob;
    if (blob) this.el.preview.src = this.url;
    else this.el.preview.removeAttribute('src');
  }

  /** The picture for the question being sent, handed over (the composer is cleared). */
  take() {
    const blob = this.blob;
    this.set(null);
    return blob;
  }

  async #openCamera() {
    try {
      this.stream = await navigator.mediaDevices.getUserMedia({ video: { width: 1024, height: 1024 } });
    } catch (err) {
      this.onError(Object.assign(new Error(`the camera is not available (${err.message}); allow camera access or pick a file`), { name: 'InputError' }));
      return;
    }
    this.el.video.srcObject = this.stream;
    this.el.camera.hidden = false;
    await this.el.video.play();
  }

  async #snap() {
    const v = this.el.video;
    if (!v.videoWidth) return; // no frame yet
    const canvas = document.createElement('canvas');
    canvas.width = v.videoWidth;
    canvas.height = v.videoHeight;
    canvas.getContext('2d').drawImage(v, 0, 0);
    this.el.snap.disabled = true; // one picture per press while the JPEG is encoded
    try {
      const blob = await new Promise((resolve) => canvas.toBlob(resolve, 'image/jpeg', 0.92));
      this.#closeCamera();
      if (blob) this.set(blob);
      else this.onError(Object.assign(new Error('the camera frame could not be encoded; try again or pick a file'), { name: 'InputError' }));
    } finally {
      this.el.snap.disabled = false;
    }
  }

  #closeCamera() {
    for (const track of this.stream?.getTracks() ?? []) track.stop();
    this.stream = null;
    this.el.video.srcObject = null;
    this.el.camera.hidden = true;
  }
}
